#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <vector>

// What the sampler (runtime/sampler.h, docs/sampling.md) is asked and answers: public, because the
// batch engine draws a row's token where its logits are (ditto/batch.h: RowOutput), which through
// pipeline stages is the last stage.
namespace ditto {

struct SamplingParams {
  double temperature = 1.0;          // 0: greedy (argmax of the penalised, biased logits)
  int top_k = 0;                     // keep the k most likely tokens; 0: all
  double top_p = 1.0;                // keep the smallest head with this much probability; in (0, 1]
  double min_p = 0.0;                // keep tokens with p >= min_p * p_max; in [0, 1]
  double repetition_penalty = 1.0;   // > 0; 1: off. Divides positive logits, multiplies negative
  double presence_penalty = 0.0;     // subtracted once from every token in the window
  double frequency_penalty = 0.0;    // subtracted per occurrence in the window
  int penalty_window = 64;           // the penalties see the last N tokens of the history; 0: all
  std::map<int32_t, double> logit_bias = {};  // added to a token's logit after the penalties
  std::optional<uint64_t> seed = {};  // required unless greedy; see with_seed()
  bool logprobs = false;             // report the chosen token's log-probability
  int top_logprobs = 0;              // and the N most likely tokens' (0 .. 20; needs logprobs)

  static constexpr int kMaxTopLogprobs = 20;

  // True when the token is the argmax: temperature 0 or top_k 1. Needs no seed.
  bool greedy() const { return temperature == 0.0 || top_k == 1; }
  // Throws ditto::Error naming the first bad parameter (logit_bias ids against `vocab`).
  void validate(size_t vocab) const;
  // Whether a penalty is on, and the end of a history that the penalties read (all of what
  // they read: empty when none is on); the token drawn does not depend on the rest.
  bool penalized() const { return repetition_penalty != 1.0 || presence_penalty != 0.0 || frequency_penalty != 0.0; }
  std::span<const int32_t> penalty_window_of(std::span<const int32_t> history) const;
};

// The params with a seed: theirs, or a fresh one from std::random_device. A request without a
// seed calls this once and reports the seed back, so that the answer can be reproduced.
SamplingParams with_seed(SamplingParams params);

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampledToken {
  int32_t token = -1;
  // Log-probability of `token` under the model's distribution: log_softmax of the raw logits,
  // before penalties, bias, temperature and filters (as OpenAI and vLLM report). NaN unless
  // params.logprobs.
  float logprob = std::numeric_limits<float>::quiet_NaN();
  std::vector<TokenLogprob> top;  // params.top_logprobs most likely tokens, best first, ties by id
};

}  // namespace ditto
