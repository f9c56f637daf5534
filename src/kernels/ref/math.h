#pragma once

#include <cstddef>

// Deterministic elementary functions built only from IEEE-exact operations (+ - * /, sqrt,
// fma, floor), so that every platform and every SIMD port computes the same bits.
// docs/numerics.md gives the algorithms; a SIMD version must follow them step for step.
namespace ditto::ref {

// e^x in f32: Cody-Waite reduction by ln 2, a degree-7 polynomial, scaling by 2^n in two
// exact steps. Within 2 ulp of the true value; 0 below -104, +inf above ln(FLT_MAX).
float exp_f32(float x);

// tanh(x) in f32, as Cephes' tanhf, on a = |x| with the sign of x put back: for a < 0.625 the
// odd polynomial fma(P(s) * s, a, a), s = a * a, P of degree 4 by Horner with fma; otherwise
// 1 - 2 / (exp_f32(a + a) + 1). Within 1 ulp of the true value.
float tanh_f32(float x);

// 1/n!, where n! is formed by exact products (exact in double up to 22!) and one rounding
// division: unlike tgamma, the same bits on every libm.
double inverse_factorial(int n);

// Double-precision versions for RoPE: its frequencies, once, and the angles of each position.
double exp_f64(double x);
double log_f64(double x);  // x > 0
void sincos_f64(double x, double* sin_out, double* cos_out);

// Sum of `count` values in the fixed 16-lane order of the contract: value i goes to lane
// i % 16 (sequentially, in order of i), then the lanes are folded 16->8->4->2->1 with
// lane[j] += lane[j + width].
inline constexpr int kLanes = 16;
float fold_lanes(float lanes[kLanes]);

// Softmax of x[0..count) in place, given their maximum: exp_f32(x[i] - max) in order of i, their
// sum in the 16-lane order, each divided by it (attention's and the MoE router's).
void softmax_f32(float* x, size_t count, float max);

}  // namespace ditto::ref
