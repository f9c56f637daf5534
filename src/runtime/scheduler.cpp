#include "runtime/scheduler.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "ditto/error.h"

namespace ditto {

namespace {

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

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
  const size_t needed = engine_.kv_bytes_to_start(request.prompt.size(), positions_to_fill(request),
                                                  rows_per_pass(request.prompt.size()));
  const size_t budget = engine_.kv_budget_bytes();
  if (needed > budget)
    throw Error("the request needs up to " + std::to_string(needed) + " bytes of KV cache and the pool holds " +
                std::to_string(budget) + ": give the cache more memory or ask for fewer tokens");
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

// The rows of a request a pass may take: the rest of its prompt, in chunks, or one.
size_t Scheduler::rows_per_pass(size_t prompt_left) const {
  return std::max(size_t(1), std::min({prompt_left, options_.chunk ? options_.chunk : SIZE_MAX,
                                       options_.batch_tokens ? options_.batch_tokens : SIZE_MAX}));
}

// KV memory a running request may still take as it fills what it may.
size_t Scheduler::bytes_to_grow(const Running& r) const {
  return engine_.kv_bytes_to_grow(r.sequence, r.end, rows_per_pass(r.request.prompt.size() - r.fed));
}

void Scheduler::admit() {
  while (!waiting_.empty() && running_.size() < options_.max_sequences) {
    auto& [number, request] = waiting_.front();
    const SequenceId sequence = engine_.open(request.prompt, !request.all_prompt_logits);
    Running r{.number = number, .request = std::move(request), .sequence = sequence, .fed = engine_.length(sequence)};
    r.end = positions_to_fill(r.request);
    size_t promised = bytes_to_grow(r);
    for (const Running& other : running_) promised += bytes_to_grow(other);
    if (promised > engine_.kv_bytes_available()) {  // wait for running requests to end
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
  const bool started = start_pass();
  const bool ready = std::any_of(running_.begin(), running_.end(), [](const Running& r) { return !r.in_flight; });
  if (!passes_.empty() && (!started || !ready || passes_.size() >= engine_.depth())) finish_pass();
}

// Starts a pass of the requests not in flight, if there are any: decode rows first (one each:
// the budget holds them all), then prompt chunks in the order requests started, within the budget.
// Through a pipeline a pass takes 1/depth of the running requests, so that the others make the
// next passes.
bool Scheduler::start_pass() {
  const size_t budget = options_.batch_tokens ? options_.batch_tokens : SIZE_MAX;
  const size_t depth = engine_.depth();
  const size_t share = depth == 1 ? SIZE_MAX : (running_.size() + depth - 1) / depth;
  Pass pass;
  // What each request's logit rows return: the token drawn (its last prompt row's and decode
  // row's), the hashes if asked. One per request: its rows in a pass all read the same.
  std::vector<RowOutput> outputs(running_.size());
  for (size_t i = 0; i < running_.size(); ++i) {
    const Running& r = running_[i];
    outputs[i] = {.sampling = &r.request.sampling, .history = r.history, .row_hash = r.request.hash_logits,
                  .chain_hash = r.request.hash_logits, .chain_from = r.logits_hash};
  }
  std::vector<RowOutput> hashed_prompt_rows(running_.size());  // the rows before the last prompt row's
  for (size_t i = 0; i < running_.size(); ++i)
    hashed_prompt_rows[i] = {.chain_hash = running_[i].request.hash_logits, .chain_from = running_[i].logits_hash};
  std::vector<bool> taken(running_.size(), false);
  size_t requests = 0;
  for (size_t i = 0; i < running_.size() && pass.rows.size() < budget && requests < share; ++i) {
    const Running& r = running_[i];
    if (!r.in_flight && r.fed == r.request.prompt.size()) {
      pass.rows.push_back({r.sequence, r.result.ids.back(), engine_.length(r.sequence), true, &outputs[i]});
      pass.owners.push_back(r.number);
      taken[i] = true, ++requests;
    }
  }
  for (size_t i = 0; i < running_.size() && pass.rows.size() < budget && requests < share; ++i) {
    const Running& r = running_[i];
    if (r.in_flight || taken[i]) continue;
    if (r.fed < r.request.prompt.size()) taken[i] = true, ++requests;
    const size_t remaining = r.request.prompt.size() - r.fed;
    const size_t count = std::min({remaining, options_.chunk ? options_.chunk : remaining, budget - pass.rows.size()});
    for (size_t p = r.fed; p < r.fed + count; ++p) {
      const bool last = p + 1 == r.request.prompt.size();
      pass.rows.push_back({r.sequence, r.request.prompt[p], p, last || r.request.all_prompt_logits,
                           last ? &outputs[i] : &hashed_prompt_rows[i]});
      pass.owners.push_back(r.number);
    }
  }
  if (pass.rows.empty()) return false;
  engine_.start(pass.rows);
  for (BatchRow& row : pass.rows) row.output = nullptr;  // read by start() only
  for (size_t i = 0; i < running_.size(); ++i) running_[i].in_flight |= taken[i];
  passes_.push_back(std::move(pass));
  return true;
}

// Waits for the oldest pass and gives its requests their tokens. A request cancelled while its
// pass was in flight is gone: its rows are passed over.
void Scheduler::finish_pass() {
  const Pass pass = std::move(passes_.front());
  passes_.pop_front();
  PassOutput output = engine_.wait();
  std::unordered_map<size_t, size_t> index_of;  // request number -> index in running_
  for (size_t i = 0; i < running_.size(); ++i) index_of.emplace(running_[i].number, i);

  size_t result = 0;
  std::vector<std::pair<size_t, StopReason>> finished;
  for (size_t t = 0; t < pass.rows.size(); ++t) {
    const auto found = index_of.find(pass.owners[t]);
    RowResult* row = pass.rows[t].logits ? &output.results[result++] : nullptr;
    if (found == index_of.end()) continue;
    const size_t index = found->second;
    Running& r = running_[index];
    r.in_flight = false;
    const bool prompt_row = r.fed < r.request.prompt.size();
    if (prompt_row) ++r.fed;
    if (!row) continue;
    if (r.request.hash_logits) r.logits_hash = row->chain_hash;
    if (prompt_row && r.fed < r.request.prompt.size()) continue;  // a prompt row before the last
    // This row chose the next token, the one at position history.size().
    SampledToken sampled = std::move(row->sampled);
    const int32_t token = sampled.token;
    if (r.result.ids.empty()) r.first_token = std::chrono::steady_clock::now();
    r.result.ids.push_back(token);
    r.history.push_back(token);
    if (r.request.hash_logits) r.result.step_hashes.push_back(row->row_hash);
    const bool go_on = !on_token_ || on_token_(r.number, sampled);
    if (r.request.sampling.logprobs) r.result.sampled.push_back(std::move(sampled));
    const bool stop = std::binary_search(r.request.stop_tokens.begin(), r.request.stop_tokens.end(), token);
    if (!go_on) finished.emplace_back(index, StopReason::Stopped);
    else if (r.result.ids.size() == r.request.max_tokens) finished.emplace_back(index, StopReason::MaxTokens);
    else if (stop) finished.emplace_back(index, StopReason::StopToken);
    else if (engine_.length(r.sequence) == r.request.max_length) finished.emplace_back(index, StopReason::ContextFull);
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
  if (r.request.hash_logits) r.result.logits_hash = r.logits_hash;
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
