#include <cmath>

#include "kernels/ref/kernels.h"
#include "kernels/ref/math.h"

namespace ditto::ref {

void rmsnorm(const float* x, size_t rows, size_t n, const float* weight, float eps, float* out) {
  for (size_t m = 0; m < rows; ++m) {
    const float* xm = x + m * n;
    float* om = out + m * n;
    float lanes[kLanes] = {};
    for (size_t i = 0; i < n; ++i) lanes[i % kLanes] = std::fma(xm[i], xm[i], lanes[i % kLanes]);
    const float mean = fold_lanes(lanes) / float(n);
    const float r = 1.0f / std::sqrt(mean + eps);
    for (size_t i = 0; i < n; ++i) om[i] = (xm[i] * r) * weight[i];
  }
}

}  // namespace ditto::ref
