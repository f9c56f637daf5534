#include "kernels/ref/kernels.h"
#include "kernels/ref/math.h"

namespace ditto::ref {

void silu_mul(const float* gate, const float* up, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + exp_f32(-g))) * up[i];
  }
}

float gelu_tanh(float g) {
  const float inner = kGeluBeta * (g + kGeluKappa * ((g * g) * g));
  return (0.5f * g) * (1.0f + tanh_f32(inner));
}

void gelu_tanh_mul(const float* gate, const float* up, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = gelu_tanh(gate[i]) * up[i];
}

void softcap(float* x, size_t n, float cap) {
  for (size_t i = 0; i < n; ++i) x[i] = tanh_f32(x[i] / cap) * cap;
}

}  // namespace ditto::ref
