#include "runtime/scheduler.h"

#include <algorithm>
#include <string>

#include "ditto/error.h"

namespace ditto {

namespace {

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

size_t blocks_for(size_t positions, size_t block_size) { return (positions + block_size - 1) / block_size; }

// The positions a request may fill: its prompt and max_tokens, at most max_length (set by
// submit(), more than the prompt); max_tokens may be anything, so it is not added unchecked.
size_t positions_to_fill(const GenerationRequest& request) {
  return request.prompt.size() + std::min(request.max_tokens, request.max_length - request.prompt.size());
}

}  // namespace

Scheduler::Scheduler(BatchEngine& engine, SchedulerOptions options, TokenCallback on_token, FinishCallback on_finish)
    : engine_(engine), options_(options), on_token_(std::move(on_token)), on_finish_(std::move(on_finish)) {
  if (options_.max_sequences == 0) throw Error("a scheduler needs room for at least one sequence");
  // Every running sequence decodes in every pass: none waits behind the others.
  if (options_.batch_tokens != 0 && options_.batch_tokens < options_.max_sequences)
    throw Error("a pass of " + std::to_string(options_.batch_tokens) + " rows cannot hold a decode row for each of " +
                std::to_string(options_.max_sequences) + " sequences");
}

GenerationRequest Scheduler::check(GenerationRequest request) const {
  const ModelConfig& config = engine_.model().config();
  const size_t limit = request.max_length ? std::min(request.max_length, config.max_positions) : config.max_positions;
  if (request.prompt.empty()) throw Error("the prompt is empty");
  if (request.max_tokens == 0) throw Error("a request must ask for at least one token");
  if (request.prompt.size() >= limit)
    throw Error("the prompt of " + std::to_string(request.prompt.size()) + " tokens leaves no room to generate in a context of " +
                std::to_string(limit) + " positions");
  for (const int32_t token : request.prompt)
    if (token < 0 || size_t(token) >= config.vocab_size)
      throw Error("token id " + std::to_string(token) + " is outside the vocabulary (0.." +
                  std::to_string(config.vocab_size - 1) + ")");
  request.max_length = limit;
  if (!request.sampling.greedy()) request.sampling = with_seed(request.sampling);
  request.sampling.validate(config.vocab_size);
  std::sort(request.stop_tokens.begin(), request.stop_tokens.end());
  const KVStats pool = engine_.kv_stats();
  const size_t needed = blocks_for(positions_to_fill(request), pool.block_size) + 1;
  if (needed > pool.blocks)
    throw Error("the request needs up to " + std::to_string(needed) + " KV blocks and the pool has " +
                std::to_string(pool.blocks) + ": give the cache more memory or ask for fewer tokens");
  return request;
}

size_t Scheduler::submit(GenerationRequest request) {
  waiting_.emplace_back(submitted_, check(std::move(request)));
  return submitted_++;
}

void Scheduler::cancel(size_t request) {
  const auto waiting = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& w) { return w.first == request; });
  if (waiting != waiting_.end()) {
    Generation result;
    result.seed = waiting->second.sampling.seed.value_or(0);  // none: greedy
    result.stop = StopReason::Cancelled;
    waiting_.erase(waiting);
    if (on_finish_) on_finish_(request, std::move(result));
    return;
  }
  for (size_t i = 0; i < running_.size(); ++i)
    if (running_[i].number == request) return finish(i, StopReason::Cancelled);
}

// Blocks a running request may still take: the rest of what it may fill, and a copy of the
// partly filled block it may share.
size_t Scheduler::blocks_to_grow(const Running& r) const {
  const size_t block_size = engine_.kv_stats().block_size;
  return blocks_for(r.end, block_size) - blocks_for(engine_.length(r.sequence), block_size) + 1;
}

void Scheduler::admit() {
  while (!waiting_.empty() && running_.size() < options_.max_sequences) {
    auto& [number, request] = waiting_.front();
    const SequenceId sequence = engine_.open(request.all_prompt_logits ? std::span<const int32_t>() : request.prompt);
    Running r{number, std::move(request), sequence, engine_.length(sequence), 0, {}, {}, {}, {}, {}};
    r.end = positions_to_fill(r.request);
    size_t promised = blocks_to_grow(r);
    for (const Running& other : running_) promised += blocks_to_grow(other);
    if (promised > engine_.available_blocks()) {  // wait for running requests to end
      request = std::move(r.request);
      engine_.close(sequence);
      return;
    }
    r.result.cached_positions = r.fed;
    r.result.seed = r.request.sampling.seed.value_or(0);
    r.history = r.request.prompt;
    r.started = std::chrono::steady_clock::now();
    running_.push_back(std::move(r));
    waiting_.pop_front();
  }
}

void Scheduler::step() {
  admit();
  if (running_.empty()) return;
  // Decode rows first (one each: the budget holds them all), then prompt chunks in the order
  // requests started, within the budget. owner[i]: the running request of row i.
  const size_t budget = options_.batch_tokens ? options_.batch_tokens : SIZE_MAX;
  std::vector<BatchRow> rows;
  std::vector<size_t> owner;
  for (size_t i = 0; i < running_.size() && rows.size() < budget; ++i) {
    const Running& r = running_[i];
    if (r.fed == r.request.prompt.size())
      rows.push_back({r.sequence, r.result.ids.back(), engine_.length(r.sequence), true}), owner.push_back(i);
  }
  for (size_t i = 0; i < running_.size() && rows.size() < budget; ++i) {
    const Running& r = running_[i];
    const size_t remaining = r.request.prompt.size() - r.fed;
    const size_t count = std::min({remaining, options_.chunk ? options_.chunk : remaining, budget - rows.size()});
    for (size_t p = r.fed; p < r.fed + count; ++p) {
      const bool last = p + 1 == r.request.prompt.size();
      rows.push_back({r.sequence, r.request.prompt[p], p, last || r.request.all_prompt_logits});
      owner.push_back(i);
    }
  }
  const std::vector<float> logits = engine_.forward(rows);

  const size_t vocab = engine_.model().config().vocab_size;
  size_t logit_row = 0;
  std::vector<std::pair<size_t, StopReason>> finished;
  for (size_t t = 0; t < rows.size(); ++t) {
    Running& r = running_[owner[t]];
    const bool prompt_row = r.fed < r.request.prompt.size();
    if (prompt_row) ++r.fed;
    if (!rows[t].logits) continue;
    const float* row = &logits[logit_row++ * vocab];
    r.logits_hash.update(row, vocab);
    if (prompt_row && r.fed < r.request.prompt.size()) continue;  // a prompt row before the last
    // This row chooses the next token, the one at position history.size().
    SampledToken sampled = sampler_.sample({row, vocab}, r.history, r.request.sampling, r.history.size());
    const int32_t token = sampled.token;
    LogitsHash step;
    step.update(row, vocab);
    if (r.result.ids.empty()) r.first_token = std::chrono::steady_clock::now();
    r.result.ids.push_back(token);
    r.history.push_back(token);
    r.result.step_hashes.push_back(step.value());
    const bool go_on = !on_token_ || on_token_(r.number, sampled);
    if (r.request.sampling.logprobs) r.result.sampled.push_back(std::move(sampled));
    const bool stop = std::binary_search(r.request.stop_tokens.begin(), r.request.stop_tokens.end(), token);
    if (!go_on) finished.emplace_back(owner[t], StopReason::Stopped);
    else if (r.result.ids.size() == r.request.max_tokens) finished.emplace_back(owner[t], StopReason::MaxTokens);
    else if (stop) finished.emplace_back(owner[t], StopReason::StopToken);
    else if (engine_.length(r.sequence) == r.request.max_length) finished.emplace_back(owner[t], StopReason::ContextFull);
  }
  // Last first, so that the indices of the others stay valid.
  std::sort(finished.begin(), finished.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [index, reason] : finished) finish(index, reason);
}

void Scheduler::finish(size_t index, StopReason reason) {
  Running& r = running_[index];
  const auto now = std::chrono::steady_clock::now();
  if (r.result.ids.empty()) r.first_token = now;  // cancelled before its first token
  r.result.stop = reason;
  r.result.logits_hash = r.logits_hash.value();
  r.result.prefill_seconds = seconds_between(r.started, r.first_token);
  r.result.decode_seconds = seconds_between(r.first_token, now);
  engine_.close(r.sequence);
  Generation result = std::move(r.result);
  const size_t number = r.number;
  running_.erase(running_.begin() + ptrdiff_t(index));
  if (on_finish_) on_finish_(number, std::move(result));
}

void Scheduler::run() {
  while (!idle()) step();
}

}  // namespace ditto
