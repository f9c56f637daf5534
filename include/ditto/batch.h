#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ditto/dtype.h"
#include "ditto/model.h"
#include "ditto/sampling.h"

namespace ditto {

using SequenceId = uint64_t;
class Pipeline;  // runtime/pipeline.h

// What a row with logits gives instead of (or with) its logits, computed where the logits are:
// through pipeline stages on the last stage, so that only this crosses back to the first.
// Pointers and spans need to live only during BatchEngine::start().
struct RowOutput {
  bool logits = false;                       // the whole row too
  const SamplingParams* sampling = nullptr;  // draw the token at position history.size()
  std::span<const int32_t> history = {};     // the sequence so far (the penalties read its end)
  bool row_hash = false;                     // FNV-1a of the row's logits
  // Continue the sequence's running FNV-1a of its logit rows: from `chain_from` at its first
  // row of the pass that asks, from the row before at its later ones.
  bool chain_hash = false;
  uint64_t chain_from = 0;
};

struct RowResult {
  SampledToken sampled;     // token -1 unless sampling was asked
  uint64_t row_hash = 0;    // if asked
  uint64_t chain_hash = 0;  // the running hash after this row, if asked
};

// One row of a forward pass: the token at `position` of a sequence. A sequence's rows in a pass
// continue it: their positions are its length, length + 1, ... in the order of the rows.
struct BatchRow {
  SequenceId sequence = 0;
  int32_t token = 0;
  size_t position = 0;
  bool logits = false;                // whether the pass computes this row's logits
  const RowOutput* output = nullptr;  // what it returns of them; null: the logits
};

// What a pass returns: the logits of its rows that return them, and the results of its rows
// with an output, both in row order.
struct PassOutput {
  std::vector<float> logits;  // rows x vocab
  std::vector<RowResult> results;
};

struct BatchOptions {
  // KV memory, in whole blocks: 0, room for one sequence of the model's context. In one process, a
  // block whose windowed layers were dropped (Gemma 3's) counts only what it keeps (KVStats).
  size_t kv_blocks = 0;
  size_t block_size = 16;   // positions per block
  DType cache_dtype = DType::F32;
  int threads = 1;
  bool prefix_cache = true;  // keep finished blocks for reuse by later sequences (open(prompt))
  ForwardObserver* observer = nullptr;  // not owned; must outlive the calls
  // The head of a pipeline (not owned; must outlive the engine): the model holds stage 0's
  // layers, each pass runs through every stage, in micro_batches parts (0: two per stage).
  Pipeline* pipeline = nullptr;
  size_t micro_batches = 0;
};

struct KVStats {
  // Blocks of the pool: those its budget holds whole, or more in one process when dropped windows
  // leave room for them.
  size_t blocks = 0, block_size = 0;
  size_t used = 0;    // blocks held by sequences
  size_t cached = 0;  // published blocks, used or not: the prefix cache
  size_t free = 0;    // blocks holding nothing
  // Blocks whose sliding-window layers gave their memory back, every sequence using them being
  // past them there (a model with windowed and global layers: Gemma 3); their other layers stay.
  size_t window_dropped = 0;
  size_t prefix_hit_positions = 0;  // positions that open() found cached, over the batch's life
  // The memory budget (bytes) and what the used blocks hold of it: each block its whole size, or
  // in one process, once its windowed layers are dropped, the size of the others.
  size_t budget_bytes = 0, used_bytes = 0;
};

// Pool sizes, in blocks of `block_size` positions: what `bytes` of memory hold for this model and
// cache type (throws ditto::Error if not one block), and what `sequences` sequences of up to
// `positions` each may fill, with a copy of a shared block each.
size_t kv_blocks_for_budget(const ModelConfig& config, DType cache, size_t block_size, size_t bytes);
size_t kv_blocks_for_sequences(size_t sequences, size_t positions, size_t block_size);

// Many sequences computed together: each forward pass takes rows from any number of
// sequences (some prefilling many positions, others decoding one), streams the weights once
// for all of them, and gives every row the bits it would have alone. Keys and values live in
// one paged pool of blocks (the memory budget); a block of positions already computed for the
// same tokens is reused instead of computed again (the prefix cache).
//
// Not thread-safe: one call at a time.
class BatchEngine {
 public:
  BatchEngine(std::shared_ptr<const Model> model, BatchOptions options = {});
  ~BatchEngine();
  BatchEngine(const BatchEngine&) = delete;
  BatchEngine& operator=(const BatchEngine&) = delete;

  // Starts a sequence. Given the prompt it will be fed and the prefix cache on, it starts with
  // the longest cached run of the prompt's first tokens (at most all but the last, so that the
  // last is computed and gives logits): length() says how many; the caller feeds the rest.
  // Without `from_cache` it starts empty (to compute every position's logits), but the prompt's
  // blocks are still kept whole for later prompts to share (sliding windows: kv_stats()).
  SequenceId open(std::span<const int32_t> prompt = {}, bool from_cache = true);
  // Ends a sequence; its blocks return to the pool, those of known content to the prefix cache.
  void close(SequenceId sequence);
  size_t length(SequenceId sequence) const;
  size_t sequences() const;

  // Computes the rows in one pass and returns the logits of those that return them, in row
  // order (rows x vocab). Throws ditto::Error, changing nothing, for an empty pass, an unknown
  // sequence, a position that does not continue its sequence or lies past the model's context,
  // a token outside the vocabulary, or a pool without the blocks the pass needs.
  std::vector<float> forward(std::span<const BatchRow> rows);
  // forward() in two halves, so that several passes can be in flight through a pipeline's stages
  // (depth() of them keep every stage busy): start() checks and begins a pass (the rows count as
  // written: a later pass may continue their sequences) and returns before its outputs; wait()
  // returns those of the oldest pass started, and throws ditto::Error if a row's sampling failed
  // (bad parameters, a logit not finite: runtime/sampler.h). What a row gets does not depend on
  // the others.
  void start(std::span<const BatchRow> rows);
  PassOutput wait();
  size_t in_flight() const;
  size_t depth() const;  // the pipeline's stages; 1 in one process

  // Blocks a pass of these rows would take from the pool (forward() needs them available).
  size_t blocks_needed(std::span<const BatchRow> rows) const;
  KVStats kv_stats() const;
  // KV memory (bytes): the budget, what the blocks in use leave of it, and the most that a
  // sequence may take from it as it grows to `end` positions, `pass` at most in one forward pass
  // (kv_bytes_to_start: one that open() starts with this prompt). Growth promised this way never
  // finds the pool full. The budget and kv_bytes_to_start never change: any thread may call them.
  size_t kv_budget_bytes() const;
  size_t kv_bytes_available() const;
  size_t kv_bytes_to_grow(SequenceId sequence, size_t end, size_t pass) const;
  size_t kv_bytes_to_start(size_t prompt, size_t end, size_t pass) const;

  const Model& model() const { return *model_; }
  const BatchOptions& options() const { return options_; }

 private:
  struct State;
  std::shared_ptr<const Model> model_;
  BatchOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace ditto
