// The insides of ditto::Tokenizer, shared by its loader (tokenizer_load.cpp) and its encode and
// decode (tokenizer.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "ditto/tokenizer.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"


namespace ditto {

// One id's token: its text in the file, what the decoder makes of it, and whether it is special.
struct TokenEntry {
  bool present = false;
  bool special = false;
  std::string text;
  // Byte-level: the bytes the token stands for. Byte fallback: its text after the decoder's
  // Replace steps (" " for "▁").
  std::string bytes;
  int byte = -1;  // byte fallback: the byte a token such as "<0x0A>" stands for, else -1
};

struct Tokenizer::Impl {
  // Byte-level BPE (GPT-2, Llama 3, Qwen), or BPE over characters with byte fallback
  // (SentencePiece-style: Llama 2, Mistral, Gemma).
  bool byte_level = true;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::unique_ptr<BpeMerger> merger;
  std::vector<AddedToken> added_tokens;
  std::unique_ptr<AddedTokenMatcher> raw_matcher;         // tokens matched before normalizing
  std::unique_ptr<AddedTokenMatcher> normalized_matcher;  // tokens matched after
  std::vector<TokenEntry> entries;                        // by id
  StringMap<int32_t> id_of_text;
  // The decoder's Strip, byte fallback only: up to `strip_count` copies of `strip_char` (one
  // UTF-8 character) come off the start of the decoded text.
  std::string strip_char;
  size_t strip_count = 0;
  // What the post-processor (TemplateProcessing) puts before and after an encoded text.
  std::vector<int32_t> prefix_ids, suffix_ids;

  // Byte fallback: where a word may be cut before merging, so that the cache serves the pieces.
  // Merging joins a character to a "▁" after it only into a token that holds such a pair, so a
  // word can be cut before each "▁" that follows another character, except where one of those
  // tokens spans the cut in the text, without changing its tokens. (Llama 2 has no such token,
  // Gemma one, ">▁</".) Off where a byte token could be part of one, or under ignore_merges.
  struct SpaceCuts {
    bool enabled = false;
    // The tokens that hold a character followed by "▁", and where each such "▁" is in them.
    std::vector<std::pair<std::string, std::vector<size_t>>> spanning;
  };
  SpaceCuts space_cuts;

  // What encode() changes, guarded by `mutex`.
  struct EncodeState {
    PreTokenizer::Scratch pre_tokenizer;
    BpeMerger::Scratch merge;
    StringMap<std::vector<int32_t>> cache;  // word -> ids
  };
  mutable std::mutex mutex;
  mutable EncodeState state;

  // Reads a parsed tokenizer.json (tokenizer_load.cpp).
  void load(const nlohmann::json& root);

  void encode_between_raw_tokens(std::string_view text, bool at_text_start, bool allow_special,
                                 std::vector<int32_t>& ids) const;
  // Merges a word in the pieces space_cuts allows.
  void merge_word(std::string_view word, std::vector<int32_t>& ids) const;
  void merge_cached(std::string_view word, std::vector<int32_t>& ids) const;
  bool spanned_at(std::string_view word, size_t cut) const;

  // Decoding one id after another, for decode() and StreamDecoder alike: appends to `out` the
  // text that the ids so far complete, and keeps in `pending` the bytes that later ids may still
  // change the text of. finish_decoding() appends what is left.
  void decode_next(int32_t id, bool skip_special, StreamDecoder::State& state, std::string& out) const;
  void finish_decoding(StreamDecoder::State& state, std::string& out) const;
  // Appends `text` to `out`, less what the decoder's Strip still takes off the start.
  void append_stripped(std::string_view text, StreamDecoder::State& state, std::string& out) const;

  const TokenEntry* entry(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < entries.size() && entries[id].present ? &entries[id] : nullptr;
  }
};

}  // namespace ditto
