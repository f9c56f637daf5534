#include "runtime/kv_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "ditto/error.h"
#include "tensor/checked.h"

namespace ditto {

size_t KVPool::block_bytes(const ModelConfig& c, DType dtype, size_t block_size) {
  return checked_product("a KV block's size", 2, c.layers, c.kv_heads, block_size, c.head_dim, dtype_size(dtype));
}

KVPool::KVPool(const ModelConfig& c, DType dtype, size_t block_size, size_t blocks, size_t first_layer, size_t layers)
    : dtype_(dtype), layers_(layers ? layers : c.layers), block_size_(block_size) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw Error("the KV cache holds f32, f16 or bf16, not " + dtype_name(dtype));
  if (block_size == 0 || blocks == 0) throw Error("the KV pool needs at least one block of at least one position");
  layout_ = {dtype, c.kv_heads, c.head_dim, block_size, nullptr, nullptr};
  const std::string what = "a KV pool of " + std::to_string(blocks) + " blocks of " + std::to_string(block_size) + " positions";
  ModelConfig held = c;
  held.layers = layers_;
  memory_bytes_ = checked_mul(block_bytes(held, dtype, block_size), blocks, what);
  require_memory(memory_bytes_, what);
  if (blocks > UINT32_MAX) throw Error(what + " has more than 2^32 - 1 blocks");
  // Anonymous pages are zero and take no memory until written: a large budget costs nothing
  // until sequences use it.
  void* memory = ::mmap(nullptr, memory_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) throw Error("cannot reserve " + gib_text(double(memory_bytes_)) + " for " + what);
  memory_ = static_cast<unsigned char*>(memory);
  layer_bytes_ = layout_.block_bytes() * blocks;
  for (size_t l = 0; l < layers_; ++l)
    if (c.window(first_layer + l) != 0) windowed_layers_.push_back(l);
  blocks_.resize(blocks);
  free_.reserve(blocks);
  for (size_t b = blocks; b-- > 0;) free_.push_back(uint32_t(b));  // take() hands out 0, 1, ... first
}

KVPool::~KVPool() { ::munmap(memory_, memory_bytes_); }

ref::KVLayerView KVPool::layer(size_t layer) const {
  ref::KVLayerView view = layout_;
  view.k = memory_ + 2 * layer * layer_bytes_;
  view.v = memory_ + (2 * layer + 1) * layer_bytes_;
  return view;
}

uint32_t KVPool::take() {
  uint32_t block;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    block = lru_.front();
    unpublish(block);
  } else {
    throw Error("the KV pool is full: all " + std::to_string(blocks_.size()) + " blocks are in use");
  }
  Block& b = blocks_[block];
  b.refs = 1;
  if (b.window_dropped) {
    b.window_dropped = false;
    --window_dropped_;
  }
  return block;
}

void KVPool::retain(uint32_t block) {
  Block& b = blocks_[block];
  if (b.refs++ == 0 && b.published) lru_.erase(b.lru);
}

void KVPool::release(uint32_t block) {
  Block& b = blocks_[block];
  if (--b.refs > 0) return;
  if (b.published) {
    b.lru = lru_.insert(lru_.end(), block);
  } else {
    free_.push_back(block);
  }
}

bool KVPool::writable(uint32_t block) const { return blocks_[block].refs == 1 && !blocks_[block].published; }

void KVPool::copy(uint32_t from, uint32_t to, size_t slots) {
  for (size_t l = 0; l < layers_; ++l) {
    const ref::KVLayerView view = layer(l);
    for (void* base : {view.k, view.v})
      for (size_t h = 0; h < view.kv_heads; ++h) {
        auto* bytes = static_cast<unsigned char*>(base);
        std::memcpy(bytes + view.offset(to, h, 0), bytes + view.offset(from, h, 0),
                    view.offset(0, 0, slots));
      }
  }
}

bool KVPool::leave_window(uint32_t block, bool passed) {
  Block& b = blocks_[block];
  if (--b.window_users > 0 || !passed || b.window_dropped || windowed_layers_.empty()) return false;
  drop_window(block);
  return true;
}

void KVPool::drop_window(uint32_t block) {
  static const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  for (size_t l : windowed_layers_) {
    const ref::KVLayerView view = layer(l);
    for (void* base : {view.k, view.v}) {
      // The whole pages of the block's bytes: a page it shares with a neighbour stays.
      const auto start = reinterpret_cast<uintptr_t>(base) + view.offset(block, 0, 0);
      const uintptr_t first = (start + page - 1) / page * page, end = (start + view.block_bytes()) / page * page;
      if (first < end) ::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);
    }
  }
  if (!blocks_[block].window_dropped) {
    blocks_[block].window_dropped = true;
    ++window_dropped_;
  }
}

const std::vector<uint32_t>* KVPool::children(ContentId parent) const {
  const auto found = index_.find(parent);
  return found == index_.end() ? nullptr : &found->second;
}

KVPool::ContentId KVPool::publish(uint32_t block, ContentId parent, std::span<const int32_t> tokens) {
  if (const auto* siblings = children(parent))
    for (const uint32_t other : *siblings) {
      const Block& o = blocks_[other];
      if (o.tokens.size() >= tokens.size() && std::equal(tokens.begin(), tokens.end(), o.tokens.begin()))
        return o.tokens.size() == tokens.size() ? o.content : kRoot;  // already cached (a longer one: no id)
    }
  Block& b = blocks_[block];
  b.published = true;
  b.parent = parent;
  b.content = next_content_++;
  b.tokens.assign(tokens.begin(), tokens.end());
  index_[parent].push_back(block);
  ++cached_;
  if (b.refs == 0) b.lru = lru_.insert(lru_.end(), block);
  return b.content;
}

void KVPool::unpublish(uint32_t block) {
  Block& b = blocks_[block];
  std::vector<uint32_t>& siblings = index_[b.parent];
  siblings.erase(std::find(siblings.begin(), siblings.end(), block));
  if (siblings.empty()) index_.erase(b.parent);
  if (b.refs == 0) lru_.erase(b.lru);
  b.published = false;
  b.tokens.clear();
  --cached_;
}

KVPool::Match KVPool::match(std::span<const int32_t> tokens, size_t limit, size_t reach) {
  Match result;
  ContentId parent = kRoot;
  limit = std::min(limit, tokens.size());
  while (result.positions < limit) {
    const auto* siblings = children(parent);
    if (siblings == nullptr) break;
    const std::span<const int32_t> wanted = tokens.subspan(result.positions, std::min(block_size_, limit - result.positions));
    // The child sharing the most leading tokens with what is wanted.
    uint32_t best = 0;
    size_t best_length = 0;
    for (const uint32_t child : *siblings) {
      const std::vector<int32_t>& held = blocks_[child].tokens;
      const size_t length = size_t(std::mismatch(wanted.begin(), wanted.end(), held.begin(), held.end()).first - wanted.begin());
      if (length > best_length) best = child, best_length = length;
    }
    if (best_length == 0) break;
    retain(best);
    result.blocks.push_back(best);
    result.positions += best_length;
    if (best_length < block_size_) break;
    parent = blocks_[best].content;
    result.contents.push_back(parent);
  }
  // The row at position P reads P - reach + 1 .. P in the widest window: the run ends at the
  // start of the last dropped block among those, until none is.
  for (bool moved = reach > 0; moved;) {
    moved = false;
    const size_t end = result.positions, from = end >= reach ? end - reach + 1 : 0;
    for (size_t b = (end + block_size_ - 1) / block_size_; b-- > from / block_size_;)
      if (blocks_[result.blocks[b]].window_dropped) {
        result.positions = b * block_size_;
        moved = true;
        break;
      }
  }
  const size_t kept = (result.positions + block_size_ - 1) / block_size_;
  for (size_t b = kept; b < result.blocks.size(); ++b) release(result.blocks[b]);
  result.blocks.resize(kept);
  result.contents.resize(std::min(result.contents.size(), result.positions / block_size_));
  return result;
}

}  // namespace ditto
