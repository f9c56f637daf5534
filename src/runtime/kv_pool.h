#pragma once
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "ditto/dtype.h"
#include "ditto/model.h"
#include "kernels/ref/kernels.h"

namespace ditto {

// The KV cache of every sequence: one pool of fixed-size blocks of positions (all layers' keys
// and values for `block_size` positions each), laid out as ref::KVLayerView defines. Sequences
// take blocks as they grow and give them back when they end; a block may be shared by several
// sequences (reference counts).
//
// The pool is also the prefix cache: a block whose positions are known (the tokens it holds
// and the block before it) can be published, and a later sequence that starts with the same
// tokens reuses it instead of computing them again. Published blocks are immutable; once no
// sequence uses them they stay cached until the pool needs the room, least recently used first.
//
// A sliding-window layer reads only its window: a block that every sequence using it has left
// behind in that layer gives its windowed layers' memory back (drop_window) and keeps the
// other layers' keys and values. Its windowed layers then hold zeros: match() ends a run before
// the next row's windows would read such a block.
//
// The memory is a budget of bytes: a block takes its whole size from it until its windowed layers
// are dropped, and the rest after; a free block either stays whole (taken again first) or, dropped,
// gives everything back.
class KVPool {
 public:
  // Identifies the content of a published block: its tokens and, through its parent's id, all
  // positions before it. Never reused, so a stale id matches nothing.
  using ContentId = uint64_t;
  static constexpr ContentId kRoot = 0;  // the parent of a sequence's first block

  // The memory is reserved at once but only touched as blocks are written. It holds the model's
  // layers first_layer .. first_layer + layers - 1 (a pipeline stage's); layers 0: all of them.
  // `blocks` is the budget, in whole blocks. With `count_dropped` (a pool of every layer), a block
  // whose windowed layers were dropped counts only the memory it keeps, so that the budget holds
  // more blocks than `blocks`, up to what it holds if every block is dropped (blocks()); without,
  // the pool has `blocks` blocks.
  KVPool(const ModelConfig& config, DType dtype, size_t block_size, size_t blocks, size_t first_layer = 0,
         size_t layers = 0, bool count_dropped = false);
  ~KVPool();
  KVPool(const KVPool&) = delete;
  KVPool& operator=(const KVPool&) = delete;

  // Bytes of one block: keys and values of every layer for block_size positions.
  static size_t block_bytes(const ModelConfig& config, DType dtype, size_t block_size);

  ref::KVLayerView layer(size_t layer) const;
  size_t block_size() const { return block_size_; }
  size_t blocks() const { return blocks_.size(); }
  DType dtype() const { return dtype_; }

  // Blocks that take() can hand out now: free ones and cached ones no sequence uses, as many as
  // the memory left beside the blocks in use holds whole.
  size_t available() const;
  size_t free_blocks() const { return free_.size() + empty_.size(); }
  size_t cached_blocks() const { return cached_; }  // published, in use or not
  size_t used_blocks() const { return blocks_.size() - free_blocks() - lru_.size(); }
  // Blocks whose windowed layers gave their memory back (drop_window) and were not taken since.
  size_t window_dropped_blocks() const { return window_dropped_; }

  // Memory, in bytes: of a block whole and with its windowed layers dropped (the same without
  // count_dropped), the budget, and what the blocks in use hold (each at its size now).
  size_t whole_block_bytes() const { return whole_bytes_; }
  size_t dropped_block_bytes() const { return dropped_bytes_; }
  size_t budget_bytes() const { return budget_; }
  size_t used_bytes() const { return used_bytes_; }

  // A block for the caller (one reference), whole: a free one, else the least recently used cached
  // block, which leaves the cache; cached blocks make way, least recently used first, until the
  // memory holds it. Check available() first: throws ditto::Error if none.
  uint32_t take();
  void retain(uint32_t block);
  // Drops one reference. A block nobody uses becomes free, or, if published, waits in the cache.
  void release(uint32_t block);
  // True if the block may be written in place: one user and not published.
  bool writable(uint32_t block) const;
  // Copies the first `slots` positions of every layer from one block to another.
  void copy(uint32_t from, uint32_t to, size_t slots);

  // The sequences that may still read a block in their windowed layers: one enters when the block
  // joins its window (taken for its positions, or matched within reach of where it goes on) and
  // leaves when the window has passed it or the sequence ends (`passed` false: the block stays
  // whole, for later prompts that end within reach of it). When the last one has passed it, its
  // windowed layers are dropped: true then.
  void enter_window(uint32_t block) { ++blocks_[block].window_users; }
  bool leave_window(uint32_t block, bool passed);
  // Gives the memory of the block's windowed layers back to the system (the whole pages in it);
  // take() hands the block out whole again. A pipeline stage drops what the head's pool dropped.
  void drop_window(uint32_t block);

  // Publishes `block`, which holds `tokens` (block_size of them, or fewer for the last block of
  // a sequence that ended) after the block with content `parent`. If the cache already holds
  // these tokens after that parent, nothing is published and that content's id is returned.
  ContentId publish(uint32_t block, ContentId parent, std::span<const int32_t> tokens);

  // The longest cached run of `tokens` from the start, at most `limit` positions, as blocks
  // (one reference each is taken for the caller) with the content ids of the full ones. The last
  // block may be matched in part; it is published, so the caller copies it before writing. With
  // `reach` (the widest window of the windowed layers; 0: none), the run ends where no block of
  // the `reach - 1` positions before its end has its windowed layers dropped.
  struct Match {
    std::vector<uint32_t> blocks;
    std::vector<ContentId> contents;  // of the blocks matched in full
    size_t positions = 0;
  };
  Match match(std::span<const int32_t> tokens, size_t limit, size_t reach = 0);

 private:
  struct Block {
    uint32_t refs = 0;
    uint32_t window_users = 0;
    bool published = false;
    bool window_dropped = false;
    bool empty = true;  // holds no memory: never written, or given back
    ContentId parent = kRoot, content = kRoot;
    std::vector<int32_t> tokens;
    std::list<uint32_t>::iterator lru;  // valid while published and unused
  };
  void unpublish(uint32_t block);
  // The bytes a block holds now: whole, dropped, or nothing (free and given back).
  size_t bytes_of(const Block& b) const { return b.empty ? 0 : b.window_dropped ? dropped_bytes_ : whole_bytes_; }
  // Gives the memory of the block's bytes in these held layers back to the system.
  void give_back(uint32_t block, std::span<const size_t> layers);
  // A block nobody uses: kept whole for the next take(), or, if dropped, given back entirely.
  void make_free(uint32_t block);
  // A published child of `parent` holding `tokens` or more after them, if any.
  const std::vector<uint32_t>* children(ContentId parent) const;

  DType dtype_;
  size_t layers_, block_size_;
  ref::KVLayerView layout_;  // layer 0's view; layer l lies layer_bytes_ further
  size_t layer_bytes_ = 0;   // keys (or values) of one layer, all blocks
  std::vector<size_t> windowed_layers_, all_layers_;  // held layers with a sliding window; all
  size_t whole_bytes_ = 0, dropped_bytes_ = 0;          // a block's memory (bytes_of)
  size_t budget_ = 0;                                    // bytes the blocks may hold together
  size_t resident_ = 0;                                  // bytes the blocks hold (free, cached, used)
  size_t used_bytes_ = 0;                                // ... those in use
  unsigned char* memory_ = nullptr;
  size_t memory_bytes_ = 0;

  std::vector<Block> blocks_;
  std::vector<uint32_t> free_;   // whole blocks nobody uses, most recently freed last
  std::vector<uint32_t> empty_;  // blocks holding no memory, block 0 last
  std::list<uint32_t> lru_;  // published blocks no sequence uses, least recently used first
  size_t cached_ = 0;
  size_t window_dropped_ = 0;
  ContentId next_content_ = kRoot + 1;
  std::unordered_map<ContentId, std::vector<uint32_t>> index_;  // parent -> published children
};

}  // namespace ditto
