#include "kernels/ref/kernels.h"
#include "kernels/ref/math.h"

namespace ditto::ref {

void rope(float* x, size_t heads, size_t head_dim, const float* cos, const float* sin) {
  const size_t half = head_dim / 2;
  for (size_t h = 0; h < heads; ++h) {
    float* v = x + h * head_dim;
    for (size_t i = 0; i < half; ++i) {
      const float a = v[i];
      const float b = v[i + half];
      // x * cos + rotate_half(x) * sin, with rotate_half(x) = (-b, a): two products, one sum.
      v[i] = a * cos[i] + (-b) * sin[i];
      v[i + half] = b * cos[i] + a * sin[i];
    }
  }
}

}  // namespace ditto::ref

namespace ditto::ref {

void rope_angles(double theta, size_t head_dim, size_t position, float* cos, float* sin) {
  const double log_theta = log_f64(theta);
  for (size_t i = 0; i < head_dim / 2; ++i) {
    const float exponent = float(2 * i) / float(head_dim);
    const float inv_freq = 1.0f / float(exp_f64(double(exponent) * log_theta));
    const float angle = float(position) * inv_freq;
    double s, c;
    sincos_f64(double(angle), &s, &c);
    cos[i] = float(c);
    sin[i] = float(s);
  }
}

}  // namespace ditto::ref
