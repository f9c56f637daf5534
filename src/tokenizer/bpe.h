#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ditto {

struct TransparentStringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
template <class Value>
using StringMap = std::unordered_map<std::string, Value, TransparentStringHash, std::equal_to<>>;

// The byte-pair merge of one pre-token, over token ids. It reproduces tokenizers' BPE model
// (Word::merge_all) exactly: the applicable merge of lowest rank goes first, the leftmost among
// equals, and a queued merge whose pair has changed since is dropped.
class BpeMerger {
 public:
  struct Merge {
    int32_t left, right, result;
  };
  // The byte id of a byte the vocabulary has no token for.
  static constexpr int32_t kNoToken = -1;

  // How a word is cut into the symbols that merging starts from.
  struct Alphabet {
    // false (byte-level BPE): every byte is a symbol, the token byte_ids[b]; a byte without a
    // token is dropped, as tokenizers' BPE without an unk_token does.
    // true (tokenizers' byte_fallback): every UTF-8 character that is a token, `char_ids`, is a
    // symbol; a character that is not is cut into its bytes, the tokens byte_ids[b] ("<0x41>").
    bool characters = false;
    std::array<int32_t, 256> byte_ids{};
    std::unordered_map<char32_t, int32_t> char_ids;
  };

  // `merges` in rank order (rank = index); a later merge of the same pair replaces an earlier
  // one, as in tokenizers. With `whole_word_ids` non-empty (tokenizers' ignore_merges), a word
  // that is itself a token is taken whole.
  BpeMerger(const std::vector<Merge>& merges, const Alphabet& alphabet, StringMap<int32_t> whole_word_ids);

  // Working memory, reused from one word to the next.
  struct Scratch {
    struct Symbol {
      int32_t id;  // -1 once merged into the symbol on its left
      int32_t prev, next;
    };
    struct QueuedMerge {
      uint32_t rank;
      int32_t pos, result;
    };
    std::vector<Symbol> symbols;
    std::vector<QueuedMerge> queue;  // a min-heap by (rank, pos)
  };

  // Appends the tokens of `word` (not empty; valid UTF-8 for an alphabet of characters) to `out`.
  void merge(std::string_view word, std::vector<int32_t>& out, Scratch& scratch) const;

 private:
  struct PairEntry {
    uint64_t key;  // left << 32 | right; kEmptyKey for a free slot
    uint32_t rank;
    int32_t result;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
  }
  // The merge of a pair, or nullptr. Open addressing with linear probing: the table is looked
  // up for every adjacent pair of every word, so it must be cheap.
  const PairEntry* find_merge(int32_t left, int32_t right) const;
  size_t slot_of(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> hash_shift_; }

  // Appends the first symbols of `word` to `symbols`.
  void add_symbols(std::string_view word, std::vector<Scratch::Symbol>& symbols) const;
  void add_symbol(int32_t id, std::vector<Scratch::Symbol>& symbols) const;
  int32_t char_id(char32_t code_point) const;

  std::vector<PairEntry> pair_table_;
  unsigned hash_shift_ = 0;
  bool characters_;
  std::array<int32_t, 256> byte_ids_;
  std::vector<int32_t> bmp_char_ids_;                        // by code point below U+10000
  std::unordered_map<char32_t, int32_t> astral_char_ids_;  // the others
  StringMap<int32_t> whole_word_ids_;
};

}  // namespace ditto
