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

namespace {

size_t page_size() {
  static const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

KVPool::KVPool(const ModelConfig& c, DType dtype, size_t block_size, size_t blocks, size_t first_layer, size_t layers,
               bool count_dropped)
    : dtype_(dtype), layers_(layers ? layers : c.layers), block_size_(block_size) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw Error("the KV cache holds f32, f16 or bf16, not " + dtype_name(dtype));
  if (block_size == 0 || blocks == 0) throw Error("the KV pool needs at least one block of at least one position");
  layout_ = {dtype, c.kv_heads, c.head_dim, block_size, nullptr, nullptr};
  const std::string what = "a KV pool of " + std::to_string(blocks) + " blocks of " + std::to_string(block_size) + " positions";
  ModelConfig held = c;
  held.layers = layers_;
  whole_bytes_ = block_bytes(held, dtype, block_size);
  budget_ = checked_mul(whole_bytes_, blocks, what);
  require_memory(budget_, what);
  for (size_t l = 0; l < layers_; ++l) {
    all_layers_.push_back(l);
    if (c.window(first_layer + l) != 0) windowed_layers_.push_back(l);
  }
  // What drop_window gives back at least, wherever the block lies: the whole pages of each of its
  // windowed layers' keys and values (a block's bytes of one layer start at a multiple of their size).
  const size_t layer_block = layout_.block_bytes(), page = page_size();
  const size_t pages = layer_block % page == 0 ? layer_block / page : std::max(layer_block / page, size_t(1)) - 1;
  dropped_bytes_ = whole_bytes_;
  if (count_dropped && windowed_layers_.size() < layers_) dropped_bytes_ -= 2 * windowed_layers_.size() * pages * page;
  const size_t slots = budget_ / dropped_bytes_;
  if (slots > UINT32_MAX) throw Error(what + " has more than 2^32 - 1 blocks");
  // Anonymous pages are zero and take no memory until written: a large budget costs nothing
  // until sequences use it, and the budget, not the reservation, bounds what they use.
  memory_bytes_ = whole_bytes_ * slots;
  void* memory =
      ::mmap(nullptr, memory_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) throw Error("cannot reserve " + gib_text(double(memory_bytes_)) + " for " + what);
  memory_ = static_cast<unsigned char*>(memory);
  layer_bytes_ = layer_block * slots;
  blocks_.resize(slots);
  empty_.reserve(slots);
  for (size_t b = slots; b-- > 0;) empty_.push_back(uint32_t(b));  // take() hands out 0, 1, ... first
}

KVPool::~KVPool() { ::munmap(memory_, memory_bytes_); }

ref::KVLayerView KVPool::layer(size_t layer) const {
  ref::KVLayerView view = layout_;
  view.k = memory_ + 2 * layer * layer_bytes_;
  view.v = memory_ + (2 * layer + 1) * layer_bytes_;
  return view;
}

size_t KVPool::available() const {
  return std::min(free_blocks() + lru_.size(), (budget_ - used_bytes_) / whole_bytes_);
}

uint32_t KVPool::take() {
  uint32_t block;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else {
    // Cached blocks with dropped windows make way until the memory holds a whole block more: a
    // whole cached block is taken as it is.
    while (resident_ + whole_bytes_ > budget_ && !lru_.empty() && blocks_[lru_.front()].window_dropped) {
      const uint32_t evicted = lru_.front();
      unpublish(evicted);
      make_free(evicted);
    }
    if (!empty_.empty() && resident_ + whole_bytes_ <= budget_) {
      block = empty_.back();
      empty_.pop_back();
    } else if (!lru_.empty()) {
      block = lru_.front();
      unpublish(block);
    } else {
      throw Error("the KV pool is full: all " + std::to_string(blocks_.size() - free_blocks()) + " blocks in use hold " +
                  std::to_string(used_bytes_) + " of its " + std::to_string(budget_) + " bytes");
    }
  }
  Block& b = blocks_[block];
  resident_ += whole_bytes_ - bytes_of(b);
  if (b.window_dropped) {
    b.window_dropped = false;
    --window_dropped_;
  }
  b.empty = false;
  b.refs = 1;
  used_bytes_ += whole_bytes_;
  return block;
}

void KVPool::retain(uint32_t block) {
  Block& b = blocks_[block];
  if (b.refs++ > 0) return;
  used_bytes_ += bytes_of(b);
  if (b.published) lru_.erase(b.lru);
}

void KVPool::release(uint32_t block) {
  Block& b = blocks_[block];
  if (--b.refs > 0) return;
  used_bytes_ -= bytes_of(b);
  if (b.published) {
    b.lru = lru_.insert(lru_.end(), block);
  } else {
    make_free(block);
  }
}

void KVPool::make_free(uint32_t block) {
  Block& b = blocks_[block];
  if (!b.window_dropped) return free_.push_back(block);
  give_back(block, all_layers_);
  resident_ -= bytes_of(b);
  b.window_dropped = false;
  --window_dropped_;
  b.empty = true;
  empty_.push_back(block);
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

void KVPool::give_back(uint32_t block, std::span<const size_t> layers) {
  const size_t page = page_size();
  for (size_t l : layers) {
    const ref::KVLayerView view = layer(l);
    for (void* base : {view.k, view.v}) {
      // The whole pages of the block's bytes: a page it shares with a neighbour stays.
      const auto start = reinterpret_cast<uintptr_t>(base) + view.offset(block, 0, 0);
      const uintptr_t first = (start + page - 1) / page * page, end = (start + view.block_bytes()) / page * page;
      if (first < end) ::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);
    }
  }
}

void KVPool::drop_window(uint32_t block) {
  give_back(block, windowed_layers_);
  Block& b = blocks_[block];
  if (b.window_dropped) return;
  // A pipeline stage's pool follows the head's drops without taking blocks itself: its blocks
  // count nothing.
  if (!b.empty) {
    const size_t given_back = whole_bytes_ - dropped_bytes_;
    resident_ -= given_back;
    if (b.refs > 0) used_bytes_ -= given_back;
  }
  b.window_dropped = true;
  ++window_dropped_;
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
