#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/ref/kernels.h"
#include "kernels/ref/math.h"

namespace ditto::ref {

void route_top_k(const float* logits, size_t experts, size_t k, bool normalize, uint32_t* chosen, float* weights) {
  // Softmax over every expert, as attention's.
  float max_logit = -INFINITY;
  for (size_t e = 0; e < experts; ++e) max_logit = std::max(max_logit, logits[e]);
  std::vector<float> probs(logits, logits + experts);
  softmax_f32(probs.data(), experts, max_logit);

  // The k most probable, in decreasing order; a tie goes to the lower index.
  std::vector<uint32_t> ranked(experts);
  std::iota(ranked.begin(), ranked.end(), 0u);
  std::partial_sort(ranked.begin(), ranked.begin() + ptrdiff_t(k), ranked.end(), [&](uint32_t a, uint32_t b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  float sum = 0.0f;
  for (size_t i = 0; i < k; ++i) sum = sum + probs[ranked[i]];
  std::sort(ranked.begin(), ranked.begin() + ptrdiff_t(k));
  for (size_t i = 0; i < k; ++i) {
    chosen[i] = ranked[i];
    weights[i] = normalize ? probs[ranked[i]] / sum : probs[ranked[i]];
  }
}

}  // namespace ditto::ref
