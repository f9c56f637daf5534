#include "ditto/batch.h"

#include <algorithm>
#include <deque>
#include <string>
#include <unordered_map>

#include "ditto/error.h"
#include "tensor/checked.h"
#include "model/decoder.h"
#include "model/weights.h"
#include "runtime/kv_pool.h"
#include "runtime/pipeline.h"
#include "runtime/row_outputs.h"

namespace ditto {

namespace {

// A block-table entry whose block went back to the pool: its positions lie before every
// layer's window, so no row of the sequence reads them again.
constexpr uint32_t kReleasedBlock = UINT32_MAX;

struct Sequence {
  std::vector<int32_t> tokens;                 // the token of every position written
  std::vector<uint32_t> blocks;                // block table: position p lies in blocks[p / block_size]
  std::vector<KVPool::ContentId> contents;     // content ids of its full blocks, once published
  size_t released = 0;                         // blocks[0 .. released) are kReleasedBlock
  size_t passed = 0;                           // blocks[0 .. passed) lie behind its windows
  // Positions whose blocks keep their windowed layers when passed: with the prefix cache, those
  // of the prompt given to open(), which later prompts may share and continue from anywhere.
  size_t kept = 0;
};

// How many positions back, its own included, any layer of the model reads: the widest sliding
// window, or 0 when a layer reads every position (then no block is ever released).
size_t attention_reach(const ModelConfig& config) {
  size_t reach = 0;
  for (size_t l = 0; l < config.layers; ++l) {
    if (config.window(l) == 0) return 0;
    reach = std::max(reach, config.window(l));
  }
  return reach;
}

// How many positions back, its own included, the windowed layers of a model that also has
// layers reading every position read: their widest window; 0 if it has no such pair of kinds.
// Their blocks keep the other layers, so only the windowed layers' memory goes back.
size_t window_reach(const ModelConfig& config) {
  size_t reach = 0;
  for (size_t l = 0; l < config.layers; ++l) reach = std::max(reach, config.window(l));
  return attention_reach(config) == 0 ? reach : 0;
}

size_t blocks_for(size_t positions, size_t block_size) {
  return checked_round_up(positions, block_size, "a count of KV blocks") / block_size;
}

}  // namespace

size_t kv_blocks_for_budget(const ModelConfig& config, DType cache, size_t block_size, size_t bytes) {
  const size_t per_block = KVPool::block_bytes(config, cache, block_size);
  if (bytes < per_block)
    throw Error("a KV budget of " + std::to_string(bytes) + " bytes holds no block: one block of " +
                std::to_string(block_size) + " positions takes " + std::to_string(per_block) + " bytes with a " +
                dtype_name(cache) + " cache");
  require_memory(bytes, "a KV budget of " + std::to_string(bytes) + " bytes");
  return bytes / per_block;
}

size_t kv_blocks_for_sequences(size_t sequences, size_t positions, size_t block_size) {
  const std::string what = "the KV blocks of " + std::to_string(sequences) + " sequences of " + std::to_string(positions) + " positions";
  return checked_mul(sequences, checked_add(blocks_for(positions, block_size), 1, what), what);
}

struct BatchEngine::State {
  KVPool pool;
  std::vector<ref::KVLayerView> layers;
  std::unordered_map<SequenceId, Sequence> sequences;
  SequenceId next_id = 1;
  size_t prefix_hit_positions = 0;
  DecoderScratch scratch;
  // One pass's rows as the decoder reads them, kept to reuse their memory.
  std::vector<int32_t> tokens;
  std::vector<size_t> positions, logit_rows;
  std::vector<KVSlot> slots;
  std::vector<ref::AttentionRow> attention;
  std::vector<BlockCopy> copies;  // the pass's copies of shared blocks, for the other stages
  std::vector<RowInputs> outputs;  // each logit row's output request
  RowOutputs row_outputs;           // in one process
  // Passes started and not yet waited for: their outputs (the logits may still be coming into
  // them), a sampling error of one process, and how many of their micro-batches the last stage
  // sends results and logits of.
  struct InFlight {
    PassOutput output;
    std::string error;
    size_t result_messages = 0, logit_messages = 0;
  };
  std::deque<InFlight> in_flight;

  size_t reach;          // attention_reach of the model
  size_t windows_reach;  // window_reach of the model
  // With a pipeline, the blocks whose windowed layers were dropped since the last pass: the other
  // stages drop them before the next.
  bool tell_stages;
  std::vector<uint32_t> window_drops;

  State(const Model& model, const BatchOptions& o)
      : pool(model.config(), o.cache_dtype, o.block_size, o.kv_blocks, model.weights().part.first_layer,
             model.weights().layers.size(), /*count_dropped=*/o.pipeline == nullptr),
        reach(attention_reach(model.config())),
        windows_reach(window_reach(model.config())),
        tell_stages(o.pipeline != nullptr) {
    for (size_t l = 0; l < model.weights().layers.size(); ++l) layers.push_back(pool.layer(l));
  }

  Sequence& find(SequenceId id) {
    const auto found = sequences.find(id);
    if (found == sequences.end()) throw Error("sequence " + std::to_string(id) + " does not exist");
    return found->second;
  }

  // Checks every row and returns the blocks the pass takes from the pool: one for each block
  // it starts, and one for a copy of a shared block it writes into.
  size_t plan(std::span<const BatchRow> rows, const ModelConfig& config) {
    if (rows.empty()) throw Error("a forward pass needs at least one row");
    const size_t block_size = pool.block_size();
    std::unordered_map<SequenceId, size_t> next;  // the position each sequence continues at
    size_t needed = 0;
    for (const BatchRow& row : rows) {
      const Sequence& sequence = find(row.sequence);
      const auto [at, first] = next.try_emplace(row.sequence, sequence.tokens.size());
      if (row.position != at->second)
        throw Error("a row of sequence " + std::to_string(row.sequence) + " is at position " +
                    std::to_string(row.position) + ", but the sequence continues at " + std::to_string(at->second));
      if (row.position >= config.max_positions)
        throw Error("position " + std::to_string(row.position) + " is past the model's context of " +
                    std::to_string(config.max_positions) + " positions");
      if (row.token < 0 || size_t(row.token) >= config.vocab_size)
        throw Error("token id " + std::to_string(row.token) + " is outside the vocabulary (0.." +
                    std::to_string(config.vocab_size - 1) + ")");
      const size_t slot = row.position % block_size;
      if (slot == 0 || (first && !pool.writable(sequence.blocks[row.position / block_size]))) ++needed;
      ++at->second;
    }
    return needed;
  }

  // The slot of a row's position, taking a block for a position that starts one and copying a
  // shared block before it is written.
  KVSlot slot_for(Sequence& sequence, size_t position) {
    const size_t block_size = pool.block_size();
    const size_t index = position / block_size, slot = position % block_size;
    if (index == sequence.blocks.size()) {
      sequence.blocks.push_back(pool.take());
      if (windows_reach) pool.enter_window(sequence.blocks.back());
    } else if (!pool.writable(sequence.blocks[index])) {
      const uint32_t copy = pool.take();
      pool.copy(sequence.blocks[index], copy, slot);
      copies.push_back({sequence.blocks[index], copy, uint32_t(slot)});
      if (windows_reach) {
        pool.enter_window(copy);
        pool.leave_window(sequence.blocks[index], false);
      }
      pool.release(sequence.blocks[index]);
      sequence.blocks[index] = copy;
    }
    return {sequence.blocks[index], uint32_t(slot)};
  }

  // Gives back the blocks beyond the positions written (after a pass that failed).
  void trim(Sequence& sequence) {
    while (sequence.blocks.size() > blocks_for(sequence.tokens.size(), pool.block_size())) {
      if (windows_reach) pool.leave_window(sequence.blocks.back(), false);
      pool.release(sequence.blocks.back());
      sequence.blocks.pop_back();
    }
  }

  // Gives back the blocks that lie wholly before the first position the sequence's next row
  // reads in any layer (a published one stays in the prefix cache for prompts that start
  // alike), or, where other layers read every position, the windowed layers of those blocks
  // that no other sequence reads in them either and that hold no kept position. (A prompt
  // continued by a later one from a block whose window was dropped computes from before it:
  // KVPool::match. Prompts, unlike what a sequence writes after them, are shared that way.)
  void release_behind_windows(Sequence& sequence) {
    const size_t next = sequence.tokens.size();
    if (windows_reach != 0 && next + 1 > windows_reach) {
      const size_t behind = (next + 1 - windows_reach) / pool.block_size();
      for (; sequence.passed < behind; ++sequence.passed)
        if (pool.leave_window(sequence.blocks[sequence.passed], sequence.passed * pool.block_size() >= sequence.kept) &&
            tell_stages)
          window_drops.push_back(sequence.blocks[sequence.passed]);
    }
    if (reach == 0 || next + 1 <= reach) return;
    const size_t behind = (next + 1 - reach) / pool.block_size();
    for (; sequence.released < behind; ++sequence.released) {
      pool.release(sequence.blocks[sequence.released]);
      sequence.blocks[sequence.released] = kReleasedBlock;
    }
  }

  // The most memory a sequence's new blocks may hold at once as it grows from `length` to `end`
  // positions, `pass` at most a pass, its first `kept` kept whole: each block at least what it
  // keeps when dropped, and whole at most those of its kept positions, of its widest window (the
  // rows after a pass read back windows_reach - 1 positions), of a pass, and a copy of a shared
  // block.
  size_t bytes_to_grow(size_t length, size_t end, size_t kept, size_t pass) const {
    const size_t block_size = pool.block_size(), whole = pool.whole_block_bytes(), dropped = pool.dropped_block_bytes();
    const size_t blocks = blocks_for(end, block_size) - blocks_for(length, block_size) + 1;
    if (dropped == whole) return blocks * whole;
    const size_t kept_blocks = kept > length ? blocks_for(kept, block_size) - length / block_size : 0;
    const size_t whole_blocks =
        kept_blocks + blocks_for(windows_reach - 1, block_size) + 1 + blocks_for(pass, block_size) + 1 + 1;
    return blocks * dropped + std::min(blocks, whole_blocks) * (whole - dropped);
  }

  KVPool::ContentId parent_of(const Sequence& sequence, size_t block) const {
    return block == 0 ? KVPool::kRoot : sequence.contents[block - 1];
  }

  // Starts the pass through a pipeline, cut into micro-batches of at least kMicroBatchRows rows
  // (a prompt chunk's), two per stage at most: the head's layers here, then the rest on the
  // other stages, the results and the logits asked for coming back into `started`, which learns
  // how many messages of them to wait for.
  static constexpr size_t kMicroBatchRows = 16;
  void start_stages(const Model& model, std::span<const BatchRow> rows, const BatchOptions& o, InFlight& started) {
    Pipeline& pipeline = *o.pipeline;
    const size_t parts = o.micro_batches ? std::min(rows.size(), o.micro_batches)
                                         : std::clamp(rows.size() / kMicroBatchRows, size_t(1), 2 * pipeline.stages());
    const size_t hidden = model.config().hidden_size, vocab = model.config().vocab_size;
    size_t logit_row = 0, logit_floats = 0;
    for (size_t part = 0; part < parts; ++part) {
      const size_t begin = part * rows.size() / parts, end = (part + 1) * rows.size() / parts, n = end - begin;
      decoder_forward(model, layers,
                      {std::span(tokens).subspan(begin, n), std::span(positions).subspan(begin, n),
                       std::span(slots).subspan(begin, n), std::span(attention).subspan(begin, n), {}},
                      nullptr, o.threads, scratch);
      StagePass pass;
      pass.positions.assign(positions.begin() + ptrdiff_t(begin), positions.begin() + ptrdiff_t(end));
      pass.slots.assign(slots.begin() + ptrdiff_t(begin), slots.begin() + ptrdiff_t(end));
      std::unordered_map<SequenceId, uint32_t> table_index;
      for (size_t t = begin; t < end; ++t) {
        const auto [at, added] = table_index.try_emplace(rows[t].sequence, uint32_t(pass.tables.size()));
        if (added) pass.tables.push_back(find(rows[t].sequence).blocks);
        pass.table_of.push_back(at->second);
        if (rows[t].logits) {
          pass.logit_rows.push_back(t - begin);
          pass.outputs.push_back(outputs[logit_row++]);
        }
      }
      if (part == 0) {
        pass.copies = copies;
        pass.window_drops = std::move(window_drops);
        window_drops.clear();
      }
      pass.first = part == 0;
      const size_t floats = pass.logit_floats(vocab);
      pipeline.send_pass(pass, std::vector<float>(scratch.x.begin(), scratch.x.begin() + ptrdiff_t(n * hidden)),
                         started.output.logits.data() + logit_floats, floats);
      logit_floats += floats;
      started.result_messages += pass.returns_results();
      started.logit_messages += floats != 0;
    }
  }
};

BatchEngine::BatchEngine(std::shared_ptr<const Model> model, BatchOptions options)
    : model_(std::move(model)), options_(options) {
  if (options_.threads < 1) throw Error("the thread count must be at least 1");
  if (options_.block_size == 0) throw Error("a KV block needs at least one position");
  if (options_.kv_blocks == 0) options_.kv_blocks = blocks_for(model_->config().max_positions, options_.block_size);
  if (options_.pipeline && options_.observer) throw Error("tracing follows one process: it does not run with --stages");
  state_ = std::make_unique<State>(*model_, options_);
  if (options_.pipeline) options_.pipeline->configure(options_.kv_blocks, options_.block_size, options_.cache_dtype, options_.threads);
}

BatchEngine::~BatchEngine() {
  try {
    if (options_.pipeline) options_.pipeline->release();
  } catch (const Error&) {  // a broken pipeline has nothing to release
  }
}

SequenceId BatchEngine::open(std::span<const int32_t> prompt, bool from_cache) {
  Sequence sequence;
  if (options_.prefix_cache) sequence.kept = prompt.size();
  if (options_.prefix_cache && from_cache && prompt.size() > 1) {
    KVPool::Match match = state_->pool.match(prompt, prompt.size() - 1, state_->windows_reach);
    if (state_->windows_reach)
      for (const uint32_t block : match.blocks) state_->pool.enter_window(block);
    sequence.blocks = std::move(match.blocks);
    sequence.contents = std::move(match.contents);
    sequence.tokens.assign(prompt.begin(), prompt.begin() + ptrdiff_t(match.positions));
    state_->prefix_hit_positions += match.positions;
    state_->release_behind_windows(sequence);
  }
  const SequenceId id = state_->next_id++;
  state_->sequences.emplace(id, std::move(sequence));
  return id;
}

void BatchEngine::close(SequenceId id) {
  Sequence& sequence = state_->find(id);
  KVPool& pool = state_->pool;
  const size_t tail = sequence.tokens.size() % pool.block_size();
  // A last block written by this sequence alone is complete now: it can serve later prompts.
  if (options_.prefix_cache && tail != 0 && pool.writable(sequence.blocks.back()))
    pool.publish(sequence.blocks.back(), state_->parent_of(sequence, sequence.blocks.size() - 1),
                 std::span(sequence.tokens).last(tail));
  // Last block first, so that the cache lets go of a sequence's end before its beginning.
  for (size_t b = sequence.blocks.size(); b-- > sequence.released;) {
    if (state_->windows_reach && b >= sequence.passed) pool.leave_window(sequence.blocks[b], false);
    pool.release(sequence.blocks[b]);
  }
  state_->sequences.erase(id);
}

size_t BatchEngine::length(SequenceId id) const { return state_->find(id).tokens.size(); }

size_t BatchEngine::sequences() const { return state_->sequences.size(); }

size_t BatchEngine::blocks_needed(std::span<const BatchRow> rows) const { return state_->plan(rows, model_->config()); }

KVStats BatchEngine::kv_stats() const {
  const KVPool& pool = state_->pool;
  return {.blocks = pool.blocks(),
          .block_size = pool.block_size(),
          .used = pool.used_blocks(),
          .cached = pool.cached_blocks(),
          .free = pool.free_blocks(),
          .window_dropped = pool.window_dropped_blocks(),
          .prefix_hit_positions = state_->prefix_hit_positions,
          .budget_bytes = pool.budget_bytes(),
          .used_bytes = pool.used_bytes()};
}

size_t BatchEngine::kv_budget_bytes() const { return state_->pool.budget_bytes(); }

size_t BatchEngine::kv_bytes_available() const { return state_->pool.budget_bytes() - state_->pool.used_bytes(); }

size_t BatchEngine::kv_bytes_to_grow(SequenceId id, size_t end, size_t pass) const {
  const Sequence& sequence = state_->find(id);
  return state_->bytes_to_grow(sequence.tokens.size(), end, sequence.kept, pass);
}

size_t BatchEngine::kv_bytes_to_start(size_t prompt, size_t end, size_t pass) const {
  return state_->bytes_to_grow(0, end, options_.prefix_cache ? prompt : 0, pass);
}

std::vector<float> BatchEngine::forward(std::span<const BatchRow> rows) {
  start(rows);
  return wait().logits;
}

size_t BatchEngine::in_flight() const { return state_->in_flight.size(); }

size_t BatchEngine::depth() const { return options_.pipeline ? options_.pipeline->stages() : 1; }

PassOutput BatchEngine::wait() {
  State& s = *state_;
  if (s.in_flight.empty()) throw Error("no forward pass was started");
  State::InFlight pass = std::move(s.in_flight.front());  // gone even if waiting fails
  s.in_flight.pop_front();
  if (options_.pipeline)
    options_.pipeline->receive_outputs(pass.result_messages, pass.logit_messages, pass.output.results);
  if (!pass.error.empty()) throw Error(pass.error);
  return std::move(pass.output);
}

void BatchEngine::start(std::span<const BatchRow> rows) {
  State& s = *state_;
  const size_t needed = s.plan(rows, model_->config());
  if (needed > s.pool.available())
    throw Error("the KV pool is full: this pass needs " + std::to_string(needed) + " more blocks of " +
                std::to_string(s.pool.block_size()) + " positions and " + std::to_string(s.pool.available()) +
                " of " + std::to_string(s.pool.blocks()) + " are available");
  // A long prompt in one pass (and all its logits) can ask for more than the machine has.
  const size_t logit_count = size_t(std::count_if(rows.begin(), rows.end(), [](const BatchRow& row) { return row.logits; }));
  const std::string pass =
      "a forward pass of " + std::to_string(rows.size()) + " rows (" + std::to_string(logit_count) + " with logits)";
  require_memory(checked_add(decoder_scratch_bytes(model_->config(), rows.size()),
                             checked_product(pass, logit_count, model_->config().vocab_size, sizeof(float)), pass),
                 pass + " with its scratch");

  s.tokens.clear();
  s.positions.clear();
  s.slots.clear();
  s.attention.clear();
  s.logit_rows.clear();
  s.outputs.clear();
  s.copies.clear();
  size_t whole_rows = 0;  // logit rows that return their logits
  for (size_t t = 0; t < rows.size(); ++t) {
    s.tokens.push_back(rows[t].token);
    s.positions.push_back(rows[t].position);
    s.slots.push_back(s.slot_for(s.find(rows[t].sequence), rows[t].position));
    if (!rows[t].logits) continue;
    s.logit_rows.push_back(t);
    const RowOutput* output = rows[t].output;
    whole_rows += !output || output->logits;
    // The sampler reads only the end of the history that the penalties see.
    const std::span<const int32_t> window =
        output && output->sampling ? output->sampling->penalty_window_of(output->history) : std::span<const int32_t>();
    s.outputs.push_back({output, window, output ? output->history.size() : 0, rows[t].sequence});
  }
  // Block tables are final now (taking blocks above may have moved them).
  for (const BatchRow& row : rows) s.attention.push_back({s.find(row.sequence).blocks.data(), row.position});

  const size_t vocab = model_->config().vocab_size;
  State::InFlight started;
  try {
    if (options_.pipeline) {
      started.output.logits.resize(whole_rows * vocab);
      s.start_stages(*model_, rows, options_, started);
    } else {
      std::vector<float> logits(s.logit_rows.size() * vocab);
      decoder_forward(*model_, s.layers, {s.tokens, s.positions, s.slots, s.attention, s.logit_rows}, logits.data(),
                      options_.threads, s.scratch, options_.observer);
      s.row_outputs.begin_pass();
      ComputedRows computed = compute_rows(s.row_outputs, std::move(logits), vocab, s.outputs);
      started.output = std::move(computed.output);
      started.error = std::move(computed.error);
    }
  } catch (...) {
    for (const BatchRow& row : rows) s.trim(s.find(row.sequence));
    throw;
  }

  const size_t block_size = s.pool.block_size();
  for (const BatchRow& row : rows) {
    Sequence& sequence = s.find(row.sequence);
    sequence.tokens.push_back(row.token);
    // A block just filled is published at once, so that running sequences can share it.
    if (options_.prefix_cache && sequence.tokens.size() % block_size == 0) {
      const size_t block = row.position / block_size;
      sequence.contents.push_back(s.pool.publish(sequence.blocks[block], s.parent_of(sequence, block),
                                                 std::span(sequence.tokens).last(block_size)));
    }
  }
  for (const BatchRow& row : rows) s.release_behind_windows(s.find(row.sequence));
  s.in_flight.push_back(std::move(started));
}

}  // namespace ditto
