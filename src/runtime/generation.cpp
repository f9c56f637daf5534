#include "runtime/generation.h"

#include <algorithm>
#include <chrono>

#include "tensor/hash.h"

namespace ditto {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Generation generate_greedy(Session& session, std::span<const int32_t> prompt, const GenerationOptions& options,
                           const std::function<void(int32_t)>& on_token) {
  const ModelConfig& config = session.model().config();
  const size_t vocab = config.vocab_size;
  Generation result;
  LogitsHash all;
  const Logits which = options.all_prompt_logits ? Logits::All : Logits::Last;
  const size_t chunk = options.chunk ? options.chunk : prompt.size();
  const auto prefill_start = std::chrono::steady_clock::now();
  std::vector<float> logits;
  for (size_t at = 0; at < prompt.size(); at += chunk) {
    logits = session.prefill(prompt.subspan(at, std::min(chunk, prompt.size() - at)), which);
    all.update(logits.data(), logits.size());
  }
  result.prefill_seconds = seconds_since(prefill_start);

  // The next token comes from the last row of the last call.
  std::span<const float> last(logits.data() + logits.size() - vocab, vocab);
  const auto decode_start = std::chrono::steady_clock::now();
  while (true) {
    const int32_t token = int32_t(std::max_element(last.begin(), last.end()) - last.begin());
    LogitsHash step;
    step.update(last.data(), vocab);
    result.ids.push_back(token);
    result.step_hashes.push_back(step.value());
    if (on_token) on_token(token);
    if (result.ids.size() == options.max_tokens || (options.stop_at_eos && token == config.eos_token_id)) break;
    if (session.position() == session.capacity()) {
      result.context_full = true;
      break;
    }
    logits = session.decode(token);
    all.update(logits.data(), logits.size());
    last = std::span<const float>(logits.data(), vocab);
  }
  result.decode_seconds = seconds_since(decode_start);
  result.logits_hash = all.value();
  return result;
}

}  // namespace ditto
