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

void rope_inverse_frequencies(double theta, size_t head_dim, float* inv_freq) {
  const double log_theta = log_f64(theta);
  for (size_t i = 0; i < head_dim / 2; ++i) {
    const float exponent = float(2 * i) / float(head_dim);
    inv_freq[i] = 1.0f / float(exp_f64(double(exponent) * log_theta));
  }
}

void llama3_scale_frequencies(float* inv_freq, size_t count, double factor, double low_freq_factor,
                              double high_freq_factor, double original_max_positions) {
  // transformers' f32 tensor operations, one by one: its `a / tensor` is reciprocal(tensor) * a,
  // and every Python number meets the tensor rounded to f32.
  const float two_pi = float(2.0 * 3.14159265358979323846);
  const float low_wavelength = float(original_max_positions / low_freq_factor);
  const float high_wavelength = float(original_max_positions / high_freq_factor);
  const float f_factor = float(factor), f_low = float(low_freq_factor), f_original = float(original_max_positions);
  const float band = float(high_freq_factor - low_freq_factor);
  for (size_t i = 0; i < count; ++i) {
    const float wavelength = (1.0f / inv_freq[i]) * two_pi;
    if (wavelength > low_wavelength) {
      inv_freq[i] = inv_freq[i] / f_factor;
    } else if (!(wavelength < high_wavelength)) {
      const float smooth = ((1.0f / wavelength) * f_original - f_low) / band;
      inv_freq[i] = ((1.0f - smooth) * inv_freq[i]) / f_factor + smooth * inv_freq[i];
    }
  }
}

void rope_angles(const float* inv_freq, size_t count, size_t position, float* cos, float* sin) {
  for (size_t i = 0; i < count; ++i) {
    const float angle = float(position) * inv_freq[i];
    double s, c;
    sincos_f64(double(angle), &s, &c);
    cos[i] = float(c);
    sin[i] = float(s);
  }
}

}  // namespace ditto::ref
