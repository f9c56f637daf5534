#include "ditto/session.h"

#include <string>

#include "ditto/error.h"
#include "model/decoder.h"
#include "runtime/kv_cache.h"

namespace ditto {

struct Session::State {
  KVCache cache;
  DecoderScratch scratch;
};

Session::Session(std::shared_ptr<const Model> model, SessionOptions options)
    : model_(std::move(model)), options_(options) {
  const ModelConfig& c = model_->config();
  if (options_.capacity == 0) options_.capacity = c.max_positions;
  if (options_.threads < 1) throw Error("the thread count must be at least 1");
  state_ = std::make_unique<State>(State{KVCache(c.layers, c.kv_heads, c.head_dim, options_.capacity, options_.cache_dtype), {}});
}

Session::~Session() = default;

std::vector<float> Session::prefill(std::span<const int32_t> tokens, Logits which) {
  const size_t vocab = model_->config().vocab_size;
  if (tokens.empty()) throw Error("prefill needs at least one token");
  for (const int32_t token : tokens)
    if (token < 0 || size_t(token) >= vocab)
      throw Error("token id " + std::to_string(token) + " is outside the vocabulary (0.." + std::to_string(vocab - 1) + ")");
  if (tokens.size() > options_.capacity - position_)
    throw Error(std::to_string(tokens.size()) + " tokens do not fit: the cache holds " +
                std::to_string(options_.capacity) + " positions and " + std::to_string(position_) + " are used");
  const size_t rows = which == Logits::All ? tokens.size() : which == Logits::Last ? 1 : 0;
  std::vector<float> logits(rows * vocab);
  decoder_forward(*model_, state_->cache, tokens, position_, which, logits.data(), options_.threads, state_->scratch,
                  options_.observer);
  position_ += tokens.size();
  return logits;
}

std::vector<float> Session::decode(int32_t token) { return prefill(std::span<const int32_t>(&token, 1), Logits::Last); }

}  // namespace ditto
