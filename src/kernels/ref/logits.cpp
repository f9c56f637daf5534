#include <cmath>

#include "kernels/ref/kernels.h"
#include "kernels/ref/math.h"

namespace ditto::ref {

float block_max(const float* x, size_t n, float* maxima) {
  float best = x[0];
  bool finite = true;
  for (size_t start = 0; start < n; start += kLogitsBlock) {
    float block = x[start];
    for (size_t i = start; i < n && i < start + kLogitsBlock; ++i) {
      finite = finite && std::isfinite(x[i]);
      block = x[i] > block ? x[i] : block;
    }
    maxima[start / kLogitsBlock] = block;
    best = block > best ? block : best;
  }
  return finite ? best : NAN;
}

size_t first_index_of(const float* x, size_t n, float value) {
  for (size_t i = 0; i < n; ++i)
    if (x[i] == value) return i;
  return n;
}

size_t indices_in_range(const float* x, size_t n, float low, float high, uint32_t* ids) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i)
    if (low <= x[i] && x[i] < high) ids[count++] = uint32_t(i);
  return count;
}

uint64_t weight_of(float x) {
  // e * 2^44 is exact (a power-of-two scaling of a float <= 1); the conversion truncates.
  return uint64_t(double(exp_f32(x) * kWeightScale));
}

uint64_t sum_of_weights(const float* z, size_t n, float max, float inverse_temperature) {
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) total += sampling_weight(z[i], max, inverse_temperature);
  return total;
}

void sampling_weights(const float* z, size_t n, float max, float inverse_temperature, uint64_t* weights) {
  for (size_t i = 0; i < n; ++i) weights[i] = sampling_weight(z[i], max, inverse_temperature);
}

}  // namespace ditto::ref
