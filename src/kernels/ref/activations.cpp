#include "kernels/ref/kernels.h"
#include "kernels/ref/math.h"

namespace ditto::ref {

void silu_mul(const float* gate, const float* up, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + exp_f32(-g))) * up[i];
  }
}

}  // namespace ditto::ref
