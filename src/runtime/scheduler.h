#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "ditto/batch.h"
#include "runtime/sampler.h"
#include "tensor/hash.h"

namespace ditto {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  size_t max_tokens = 32;
  std::vector<int32_t> stop_tokens;  // a generated token among these ends it (and is kept)
  size_t max_length = 0;             // positions the sequence may fill; 0: the model's context
  bool hash_logits = false;          // give step_hashes and logits_hash (verify compares them)
  bool all_prompt_logits = false;    // compute, and hash, the logits of every prompt position too
                                     // (computed all: the prefix cache is not used)
  SamplingParams sampling{.temperature = 0.0};  // greedy unless asked; sampling without a seed draws one
};

// Stopped: by the token callback; Cancelled: by cancel(), before its end.
enum class StopReason { MaxTokens, StopToken, ContextFull, Stopped, Cancelled };

struct Generation {
  std::vector<int32_t> ids;
  std::vector<SampledToken> sampled;  // each token with its logprobs, if the request asked for them
  uint64_t seed = 0;                  // the seed its draws used (the request's, or one drawn for it); 0 if greedy
  // If the request asked (hash_logits): step_hashes[i], FNV-1a of the logits that chose ids[i];
  // logits_hash, of every logits row computed for it, in position order.
  std::vector<uint64_t> step_hashes;
  uint64_t logits_hash = 0;
  StopReason stop = StopReason::MaxTokens;
  size_t cached_positions = 0;        // prompt positions the prefix cache served
  double prefill_seconds = 0, decode_seconds = 0;  // from its start to its first token, then to its end
};

struct SchedulerOptions {
  size_t max_sequences = 1;  // sequences in flight at most
  size_t chunk = 0;          // prompt positions a sequence prefills per pass; 0: all that remain
  size_t batch_tokens = 0;   // rows per pass at most (decode rows first); 0: no limit, else >= max_sequences
};

// Continuous batching of generation requests on one BatchEngine: each step() is one forward pass
// over the decode rows of the running requests and the next prompt chunks of the starting ones;
// a finished request makes room for the next waiting one at once. A request starts when a
// sequence is free and the pool's memory can hold all it may grow to (its prompt, max_tokens;
// BatchEngine::kv_bytes_to_grow), so that a running request never runs out of blocks. Tokens are drawn by the sampler
// (runtime/sampler.h), a pure function of the logits, the request's history, its parameters and
// the position, where the logits are (the engine's RowOutput: through pipeline stages, the last
// stage, so that only tokens come back). What a request gets does not depend on the others: the
// engine's contract.
class Scheduler {
 public:
  // Sees each token as it is chosen (with its logprobs if the request asked for them); returning
  // false ends the request there (a stop string).
  using TokenCallback = std::function<bool(size_t request, const SampledToken& token)>;
  using FinishCallback = std::function<void(size_t request, Generation generation)>;

  Scheduler(BatchEngine& engine, SchedulerOptions options, TokenCallback on_token, FinishCallback on_finish);

  // Queues a request and returns its number (0, 1, ... in order of submission). Throws
  // ditto::Error for an empty prompt, one that leaves no room to generate in max_length or could
  // never fit in the pool, or bad sampling parameters.
  size_t submit(GenerationRequest request);
  // What submit() checks, and the request as it will run (max_length set, a seed drawn if
  // missing). Reads only what never changes (the model, the pool's size): any thread may call it.
  GenerationRequest check(GenerationRequest request) const;
  // Ends a waiting or running request now (its blocks return to the pool) and hands what it
  // generated to the finish callback with StopReason::Cancelled. Unknown or finished requests
  // are ignored. Not from within a callback: the token callback returns false instead.
  void cancel(size_t request);
  // One forward pass (nothing if idle). Through a pipeline of K stages (BatchEngine::depth())
  // up to K passes are in flight, each of requests not in another, so that every stage has work:
  // a step starts a pass of the requests that are not in flight and waits for the oldest pass
  // only when K are in flight or no request is left to start.
  void step();
  // Steps until every request is done.
  void run();
  bool idle() const { return waiting_.empty() && running_.empty() && passes_.empty(); }
  size_t waiting() const { return waiting_.size(); }
  size_t running() const { return running_.size(); }

 private:
  struct Running {
    size_t number;
    GenerationRequest request;
    SequenceId sequence;
    size_t fed;            // prompt positions in the cache
    size_t end = 0;        // positions it may fill: prompt + max_tokens, capped by max_length
    Generation result = {};
    std::vector<int32_t> history = {};  // prompt and generated tokens, for the sampler's penalties
    uint64_t logits_hash = LogitsHash().value();  // the running hash so far
    std::chrono::steady_clock::time_point started = {}, first_token = {};
    bool in_flight = false;  // in a pass started and not yet finished
  };
  // A pass started: its rows and the number of the request of each.
  struct Pass {
    std::vector<BatchRow> rows;
    std::vector<size_t> owners;
  };
  void admit();
  bool start_pass();
  void finish_pass();
  size_t rows_per_pass(size_t prompt_left) const;
  size_t bytes_to_grow(const Running& r) const;
  void finish(size_t index, StopReason reason);

  BatchEngine& engine_;
  SchedulerOptions options_;
  TokenCallback on_token_;
  FinishCallback on_finish_;
  std::deque<std::pair<size_t, GenerationRequest>> waiting_;
  std::vector<Running> running_;
  std::deque<Pass> passes_;  // oldest first
  size_t submitted_ = 0;
};

}  // namespace ditto
