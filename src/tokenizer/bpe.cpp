#include "tokenizer/bpe.h"

#include <algorithm>
#include <bit>

#include "tokenizer/utf8.h"

namespace ditto {

namespace {
constexpr char32_t kFirstAstral = 0x10000;
}  // namespace

BpeMerger::BpeMerger(const std::vector<Merge>& merges, const Alphabet& alphabet, StringMap<int32_t> whole_word_ids)
    : characters_(alphabet.characters), byte_ids_(alphabet.byte_ids), whole_word_ids_(std::move(whole_word_ids)) {
  if (characters_) {
    bmp_char_ids_.assign(kFirstAstral, kNoToken);
    for (const auto& [code_point, id] : alphabet.char_ids) {
      if (code_point < kFirstAstral) {
        bmp_char_ids_[code_point] = id;
      } else {
        astral_char_ids_[code_point] = id;
      }
    }
  }
  // At most half full, so probes stay short.
  const size_t capacity = std::bit_ceil(std::max<size_t>(2 * merges.size(), 16));
  hash_shift_ = 64 - std::countr_zero(capacity);
  pair_table_.assign(capacity, PairEntry{kEmptyKey, 0, 0});
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Merge& merge = merges[rank];
    const uint64_t key = pair_key(merge.left, merge.right);
    size_t slot = slot_of(key);
    while (pair_table_[slot].key != kEmptyKey && pair_table_[slot].key != key) {
      slot = (slot + 1) & (capacity - 1);
    }
    pair_table_[slot] = {key, static_cast<uint32_t>(rank), merge.result};
  }
}

const BpeMerger::PairEntry* BpeMerger::find_merge(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  for (size_t slot = slot_of(key);; slot = (slot + 1) & (pair_table_.size() - 1)) {
    const PairEntry& entry = pair_table_[slot];
    if (entry.key == key) return &entry;
    if (entry.key == kEmptyKey) return nullptr;
  }
}

void BpeMerger::merge(std::string_view word, std::vector<int32_t>& out, Scratch& scratch) const {
  if (!whole_word_ids_.empty()) {
    const auto whole = whole_word_ids_.find(word);
    if (whole != whole_word_ids_.end()) {
      out.push_back(whole->second);
      return;
    }
  }
  auto& symbols = scratch.symbols;
  auto& queue = scratch.queue;
  symbols.clear();
  queue.clear();
  add_symbols(word, symbols);
  if (symbols.size() == 1) {  // a single byte or character, as often: nothing to merge
    out.push_back(symbols[0].id);
    return;
  }
  if (symbols.empty()) return;
  const auto size = static_cast<int32_t>(symbols.size());
  const auto later = [](const Scratch::QueuedMerge& a, const Scratch::QueuedMerge& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  const auto enqueue = [&](int32_t pos, int32_t right_pos) {
    if (const PairEntry* entry = find_merge(symbols[pos].id, symbols[right_pos].id)) {
      queue.push_back({entry->rank, pos, entry->result});
      std::push_heap(queue.begin(), queue.end(), later);
    }
  };
  for (int32_t i = 0; i + 1 < size; ++i) enqueue(i, i + 1);

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), later);
    const Scratch::QueuedMerge top = queue.back();
    queue.pop_back();
    Scratch::Symbol& left = symbols[top.pos];
    if (left.id < 0 || left.next < 0) continue;
    const int32_t right_pos = left.next;
    // Stale if the pair at this position is no longer one that merges into the same token
    // (tokenizers compares the result, not the rank; so does this).
    const PairEntry* current = find_merge(left.id, symbols[right_pos].id);
    if (current == nullptr || current->result != top.result) continue;

    left.id = top.result;
    left.next = symbols[right_pos].next;
    symbols[right_pos].id = -1;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) enqueue(left.prev, top.pos);
    if (left.next >= 0) enqueue(top.pos, left.next);
  }
  for (int32_t pos = 0; pos >= 0; pos = symbols[pos].next) out.push_back(symbols[pos].id);
}

int32_t BpeMerger::char_id(char32_t code_point) const {
  if (code_point < kFirstAstral) return bmp_char_ids_[code_point];
  const auto found = astral_char_ids_.find(code_point);
  return found == astral_char_ids_.end() ? kNoToken : found->second;
}

void BpeMerger::add_symbol(int32_t id, std::vector<Scratch::Symbol>& symbols) const {
  if (id == kNoToken) return;
  const auto at = static_cast<int32_t>(symbols.size());
  symbols.push_back({id, at - 1, -1});
  if (at > 0) symbols[at - 1].next = at;
}

void BpeMerger::add_symbols(std::string_view word, std::vector<Scratch::Symbol>& symbols) const {
  if (!characters_) {
    for (const char byte : word) add_symbol(byte_ids_[static_cast<unsigned char>(byte)], symbols);
    return;
  }
  for (size_t pos = 0; pos < word.size();) {
    const size_t length = utf8::char_length(static_cast<unsigned char>(word[pos]));
    const int32_t id = char_id(utf8::code_point_at(word, pos));
    if (id != kNoToken) {
      add_symbol(id, symbols);
    } else {
      for (size_t i = pos; i < pos + length; ++i) add_symbol(byte_ids_[static_cast<unsigned char>(word[i])], symbols);
    }
    pos += length;
  }
}

}  // namespace ditto
