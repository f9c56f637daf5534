#include "ditto/session.h"

#include <string>

#include "ditto/batch.h"
#include "ditto/error.h"

namespace ditto {

namespace {

constexpr size_t kSessionBlock = 16;

BatchOptions batch_options(const ModelConfig& config, const SessionOptions& o) {
  BatchOptions batch;
  const size_t capacity = o.capacity ? o.capacity : config.max_positions;
  batch.kv_blocks = (capacity + kSessionBlock - 1) / kSessionBlock;
  batch.block_size = kSessionBlock;
  batch.cache_dtype = o.cache_dtype;
  batch.threads = o.threads;
  batch.prefix_cache = false;  // one sequence, fed in full: nothing to reuse
  batch.observer = o.observer;
  batch.pipeline = o.pipeline;
  return batch;
}

}  // namespace

struct Session::State {
  BatchEngine engine;
  SequenceId sequence;
};

Session::Session(std::shared_ptr<const Model> model, SessionOptions options)
    : model_(std::move(model)), options_(options) {
  const size_t context = model_->config().max_positions;
  if (options_.capacity == 0) options_.capacity = context;
  if (options_.capacity > context)
    throw Error("a session of " + std::to_string(options_.capacity) + " positions is past the model's context of " +
                std::to_string(context) + " positions");
  state_.reset(new State{BatchEngine(model_, batch_options(model_->config(), options_)), 0});
  state_->sequence = state_->engine.open();
}

Session::~Session() = default;

size_t Session::position() const { return state_->engine.length(state_->sequence); }

void Session::reset() {
  state_->engine.close(state_->sequence);
  state_->sequence = state_->engine.open();
}

std::vector<float> Session::prefill(std::span<const int32_t> tokens, Logits which) {
  if (tokens.empty()) throw Error("prefill needs at least one token");
  const size_t position = this->position();
  if (tokens.size() > options_.capacity - position)
    throw Error(std::to_string(tokens.size()) + " tokens do not fit: the cache holds " +
                std::to_string(options_.capacity) + " positions and " + std::to_string(position) + " are used");
  std::vector<BatchRow> rows(tokens.size());
  for (size_t t = 0; t < tokens.size(); ++t)
    rows[t] = {state_->sequence, tokens[t], position + t,
               which == Logits::All || (which == Logits::Last && t + 1 == tokens.size())};
  return state_->engine.forward(rows);
}

std::vector<float> Session::decode(int32_t token) { return prefill(std::span<const int32_t>(&token, 1), Logits::Last); }

}  // namespace ditto
