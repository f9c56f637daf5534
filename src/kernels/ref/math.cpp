#include "kernels/ref/math.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ditto::ref {

namespace {

float pow2_f32(int n) {  // 2^n for n in [-126, 127], built from its bits
  const uint32_t bits = uint32_t(n + 127) << 23;
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

double pow2_f64(int64_t n) {  // 2^n for n in [-1022, 1023]
  const uint64_t bits = uint64_t(n + 1023) << 52;
  double value;
  std::memcpy(&value, &bits, 8);
  return value;
}

}  // namespace

double inverse_factorial(int n) {
  double factorial = 1.0;
  for (int i = 2; i <= n; ++i) factorial *= i;
  return 1.0 / factorial;
}

float exp_f32(float x) {
  if (x != x) return x;
  if (x > 88.72283935546875f) return std::numeric_limits<float>::infinity();
  if (x < -104.0f) return 0.0f;
  const float n = std::floor(x * 1.44269502162933349609375f + 0.5f);
  // ln 2 split so that n * kLn2Hi is exact for |n| < 2^16.
  float r = std::fma(-n, 0.693145751953125f, x);
  r = std::fma(-n, 1.428606765330187045e-06f, r);
  // Taylor coefficients 1/k!, k = 7 .. 0, evaluated by Horner with fma.
  float p = 1.98412698e-4f;
  p = std::fma(p, r, 1.38888889e-3f);
  p = std::fma(p, r, 8.33333333e-3f);
  p = std::fma(p, r, 4.16666667e-2f);
  p = std::fma(p, r, 1.66666667e-1f);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  // 2^n in two factors, each a normal number; only the second product can round
  // (into the subnormal range).
  const int ni = int(n);
  const int half = ni / 2;
  return (p * pow2_f32(half)) * pow2_f32(ni - half);
}

float tanh_f32(float x) {
  // On |x|, then the sign of x (so tanh(-0) = -0).
  const float a = std::fabs(x);
  float t;
  if (a < 0.625f) {
    const float s = a * a;
    float p = -5.70498872745e-3f;
    p = std::fma(p, s, 2.06390887954e-2f);
    p = std::fma(p, s, -5.37397155531e-2f);
    p = std::fma(p, s, 1.33314422036e-1f);
    p = std::fma(p, s, -3.33332819422e-1f);
    t = std::fma(p * s, a, a);
  } else {
    // exp_f32 overflows to +inf beyond |x| ~ 44, where the result rounds to 1 anyway.
    t = 1.0f - 2.0f / (exp_f32(a + a) + 1.0f);
  }
  return std::copysign(t, x);
}

double exp_f64(double x) {
  if (x != x) return x;
  if (x > 709.782712893384) return std::numeric_limits<double>::infinity();
  if (x < -745.2) return 0.0;
  const double n = std::floor(x * 1.4426950408889634 + 0.5);
  double r = std::fma(-n, 6.93147180369123816490e-01, x);
  r = std::fma(-n, 1.90821492927058770002e-10, r);
  // Taylor series to r^13: |r| <= 0.35, so the truncation error is below 1e-17.
  double p = inverse_factorial(13);
  for (int k = 12; k >= 1; --k) p = std::fma(p, r, inverse_factorial(k));
  p = std::fma(p, r, 1.0);
  const int64_t ni = int64_t(n);
  const int64_t half = ni / 2;
  return (p * pow2_f64(half)) * pow2_f64(ni - half);
}

double log_f64(double x) {
  if (!(x > 0.0)) return x == 0.0 ? -std::numeric_limits<double>::infinity()
                                  : std::numeric_limits<double>::quiet_NaN();
  if (x == std::numeric_limits<double>::infinity()) return x;
  uint64_t bits;
  std::memcpy(&bits, &x, 8);
  int64_t e = int64_t((bits >> 52) & 0x7ff);
  if (e == 0) {  // subnormal: scale into the normal range first
    x *= 18014398509481984.0;  // 2^54
    std::memcpy(&bits, &x, 8);
    e = int64_t((bits >> 52) & 0x7ff) - 54;
  }
  e -= 1023;
  bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;  // mantissa in [1, 2)
  double m;
  std::memcpy(&m, &bits, 8);
  if (m > 1.4142135623730951) {
    m *= 0.5;
    e += 1;
  }
  // log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716: series to s^23.
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double p = 1.0 / 23.0;
  for (int k = 21; k >= 1; k -= 2) p = std::fma(p, s2, 1.0 / k);
  const double log_m = 2.0 * s * p;
  const double de = double(e);
  return std::fma(de, 6.93147180369123816490e-01, std::fma(de, 1.90821492927058770002e-10, log_m));
}

void sincos_f64(double x, double* sin_out, double* cos_out) {
  // Reduce by pi/2 written as the sum of three doubles; accurate for |x| < 2^20.
  const double k = std::floor(x * 0.63661977236758134308 + 0.5);
  double r = std::fma(-k, 1.5707963267948966, x);
  r = std::fma(-k, 6.123233995736766e-17, r);
  r = std::fma(-k, -1.4973849048591698e-33, r);
  const double r2 = r * r;
  // Taylor series on |r| <= pi/4: sin to r^19, cos to r^20.
  double s = -inverse_factorial(19);
  double c = inverse_factorial(20);
  for (int n = 17; n >= 1; n -= 2) {
    s = std::fma(s, r2, (n / 2) % 2 ? -inverse_factorial(n) : inverse_factorial(n));
    c = std::fma(c, r2, ((n + 1) / 2) % 2 ? -inverse_factorial(n + 1) : inverse_factorial(n + 1));
  }
  s *= r;
  c = std::fma(c, r2, 1.0);
  const int64_t quadrant = int64_t(k) & 3;
  switch (quadrant) {
    case 0: *sin_out = s; *cos_out = c; break;
    case 1: *sin_out = c; *cos_out = -s; break;
    case 2: *sin_out = -s; *cos_out = -c; break;
    default: *sin_out = -c; *cos_out = s; break;
  }
}

float fold_lanes(float lanes[kLanes]) {
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) lanes[j] = lanes[j] + lanes[j + width];
  return lanes[0];
}

void softmax_f32(float* x, size_t count, float max) {
  float lanes[kLanes] = {};
  for (size_t i = 0; i < count; ++i) {
    x[i] = exp_f32(x[i] - max);
    lanes[i % kLanes] = lanes[i % kLanes] + x[i];
  }
  const float total = fold_lanes(lanes);
  for (size_t i = 0; i < count; ++i) x[i] = x[i] / total;
}

}  // namespace ditto::ref
