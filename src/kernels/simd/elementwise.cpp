// SIMD RMSNorm, RoPE and its angles, SiLU·mul, GELU-tanh·mul, softcapping and the KV cache's
// rounding: the reference formulas, vectorised across elements; the tail past the last full vector
// runs the scalar reference formula.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"
#include "kernels/ref/math.h"
#include "kernels/thread_pool.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/elementwise.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/simd/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ditto::HWY_NAMESPACE {
#if DITTO_SIMD_HAS_FMA

constexpr size_t kLanesF = hn::MaxLanes(DF());

void RmsNorm(const float* x, size_t rows, size_t n, const float* weight, float eps, float* out) {
  const DF d;
  for (size_t m = 0; m < rows; ++m) {
    const float* xm = x + m * n;
    float* om = out + m * n;
    VF lanes[kLaneVectors];
    for (auto& lane : lanes) lane = hn::Zero(d);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
      for (size_t v = 0; v < kLaneVectors; ++v) {
        const VF xv = hn::LoadU(d, xm + i + v * kLanesF);
        lanes[v] = hn::MulAdd(xv, xv, lanes[v]);
      }
    // The tail continues lane i % 16 in scalar code, then the lanes fold as in the reference.
    HWY_ALIGN float scalar_lanes[16];
    for (size_t v = 0; v < kLaneVectors; ++v) hn::Store(lanes[v], d, scalar_lanes + v * kLanesF);
    for (; i < n; ++i) scalar_lanes[i % 16] = std::fma(xm[i], xm[i], scalar_lanes[i % 16]);
    const float mean = ref::fold_lanes(scalar_lanes) / float(n);
    const float r = 1.0f / std::sqrt(mean + eps);
    const VF rv = hn::Set(d, r);
    size_t j = 0;
    for (; j + kLanesF <= n; j += kLanesF)
      hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, xm + j), rv), hn::LoadU(d, weight + j)), d, om + j);
    for (; j < n; ++j) om[j] = (xm[j] * r) * weight[j];
  }
}

void Rope(float* x, size_t heads, size_t head_dim, const float* cos, const float* sin) {
  const DF d;
  const size_t half = head_dim / 2;
  for (size_t h = 0; h < heads; ++h) {
    float* v = x + h * head_dim;
    size_t i = 0;
    for (; i + kLanesF <= half; i += kLanesF) {
      const VF a = hn::LoadU(d, v + i), b = hn::LoadU(d, v + i + half);
      const VF c = hn::LoadU(d, cos + i), s = hn::LoadU(d, sin + i);
      hn::StoreU(hn::Add(hn::Mul(a, c), hn::Mul(hn::Neg(b), s)), d, v + i);
      hn::StoreU(hn::Add(hn::Mul(b, c), hn::Mul(a, s)), d, v + i + half);
    }
    for (; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos[i] + (-b) * sin[i];
      v[i + half] = b * cos[i] + a * sin[i];
    }
  }
}

// ref::rope_angles: each angle in f32, then ref::sincos_f64's steps in f64 lanes, rounded to f32.
// The reference's 22 fmas an angle are calls to libm where the baseline lacks the instruction:
// with Gemma 3 270M's two bases of 128 angles a position they took 2% of its prefill, the other
// thread waiting.
void RopeAngles(const float* inv_freq, size_t count, size_t position, float* cos, float* sin) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const hn::RebindToSigned<decltype(dd)> di;
  using VD = hn::Vec<decltype(dd)>;
  const auto constant = [dd](double value) HWY_ATTR { return hn::Set(dd, value); };
  // The Taylor coefficients of sin and cos at r^n and r^(n+1), n = 17, 15, .., 1, with their signs.
  double sine_terms[9], cosine_terms[9];
  for (int n = 17; n >= 1; n -= 2) {
    sine_terms[(17 - n) / 2] = (n / 2) % 2 ? -ref::inverse_factorial(n) : ref::inverse_factorial(n);
    cosine_terms[(17 - n) / 2] = ((n + 1) / 2) % 2 ? -ref::inverse_factorial(n + 1) : ref::inverse_factorial(n + 1);
  }
  const auto position_f = hn::Set(df, float(position));
  size_t i = 0;
  for (; i + hn::Lanes(dd) <= count; i += hn::Lanes(dd)) {
    const VD x = hn::PromoteTo(dd, hn::Mul(position_f, hn::LoadU(df, inv_freq + i)));
    const VD k = hn::Floor(hn::Add(hn::Mul(x, constant(0.63661977236758134308)), constant(0.5)));
    const VD minus_k = hn::Neg(k);
    VD r = hn::MulAdd(minus_k, constant(1.5707963267948966), x);
    r = hn::MulAdd(minus_k, constant(6.123233995736766e-17), r);
    r = hn::MulAdd(minus_k, constant(-1.4973849048591698e-33), r);
    const VD r2 = hn::Mul(r, r);
    VD s = constant(-ref::inverse_factorial(19)), c = constant(ref::inverse_factorial(20));
    for (size_t t = 0; t < 9; ++t) {
      s = hn::MulAdd(s, r2, constant(sine_terms[t]));
      c = hn::MulAdd(c, r2, constant(cosine_terms[t]));
    }
    s = hn::Mul(s, r);
    c = hn::MulAdd(c, r2, constant(1.0));
    // By the quadrant k mod 4: 1 and 3 swap sine and cosine; 2 and 3 negate the sine, 1 and 2
    // the cosine.
    const auto quadrant = hn::And(hn::ConvertTo(di, k), hn::Set(di, 3));
    const auto in = [&](int64_t a, int64_t b) HWY_ATTR {
      return hn::RebindMask(dd, hn::Or(hn::Eq(quadrant, hn::Set(di, a)), hn::Eq(quadrant, hn::Set(di, b))));
    };
    const auto swap = in(1, 3);
    const VD sine = hn::IfThenElse(swap, c, s), cosine = hn::IfThenElse(swap, s, c);
    hn::StoreU(hn::DemoteTo(df, hn::IfThenElse(in(1, 2), hn::Neg(cosine), cosine)), df, cos + i);
    hn::StoreU(hn::DemoteTo(df, hn::IfThenElse(in(2, 3), hn::Neg(sine), sine)), df, sin + i);
  }
  if (i < count) ref::rope_angles(inv_freq + i, count - i, position, cos + i, sin + i);
}

void SiluMul(const float* gate, const float* up, size_t n, float* out) {
  const DF d;
  const VF one = hn::Set(d, 1.0f);
  size_t i = 0;
  for (; i + kLanesF <= n; i += kLanesF) {
    const VF g = hn::LoadU(d, gate + i);
    hn::StoreU(hn::Mul(hn::Div(g, hn::Add(one, Exp(d, hn::Neg(g)))), hn::LoadU(d, up + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] = (gate[i] / (1.0f + ref::exp_f32(-gate[i]))) * up[i];
}

void GeluTanhMul(const float* gate, const float* up, size_t n, float* out) {
  const DF d;
  const VF beta = hn::Set(d, ref::kGeluBeta), kappa = hn::Set(d, ref::kGeluKappa);
  size_t i = 0;
  for (; i + kLanesF <= n; i += kLanesF) {
    const VF g = hn::LoadU(d, gate + i);
    const VF inner = hn::Mul(beta, hn::Add(g, hn::Mul(kappa, hn::Mul(hn::Mul(g, g), g))));
    const VF gelu = hn::Mul(hn::Mul(hn::Set(d, 0.5f), g), hn::Add(hn::Set(d, 1.0f), Tanh(d, inner)));
    hn::StoreU(hn::Mul(gelu, hn::LoadU(d, up + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] = ref::gelu_tanh(gate[i]) * up[i];
}

void Softcap(float* x, size_t n, float cap) {
  const DF d;
  const VF c = hn::Set(d, cap);
  size_t i = 0;
  for (; i + kLanesF <= n; i += kLanesF) hn::StoreU(hn::Mul(Tanh(d, hn::Div(hn::LoadU(d, x + i), c)), c), d, x + i);
  for (; i < n; ++i) x[i] = ref::tanh_f32(x[i] / cap) * cap;
}

// store_from_f32 of n elements (the KV cache's rows): f32 copied; f16 by the conversion
// instruction, which rounds to nearest even as f32_to_f16 does and quiets a NaN keeping the top
// of its payload as f32_to_f16 does; bf16 by f32_to_bf16's integer arithmetic (the conversion
// instruction of AVX512-BF16 would flush subnormals to zero).
void NarrowRow(const float* in, size_t n, DType dtype, void* out) {
  if (dtype == DType::F32) return void(std::memcpy(out, in, n * sizeof(float)));
  const DF d;
  size_t i = 0;
  if (dtype == DType::F16) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    for (; i + kLanesF <= n; i += kLanesF)
      hn::StoreU(hn::DemoteTo(dh, hn::LoadU(d, in + i)), dh, static_cast<hwy::float16_t*>(out) + i);
  } else if (dtype == DType::BF16) {
    const hn::RebindToUnsigned<DF> du;
    const hn::Rebind<uint16_t, DF> d16;
    for (; i + kLanesF <= n; i += kLanesF) {
      const auto bits = hn::BitCast(du, hn::LoadU(d, in + i));
      const auto nan = hn::Gt(hn::And(bits, hn::Set(du, 0x7fffffffu)), hn::Set(du, 0x7f800000u));
      const auto odd = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));  // ties go to the even result
      const auto rounded = hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), odd));
      const auto quieted = hn::Or(bits, hn::Set(du, 0x400000u));  // (bits >> 16) | 0x40 once shifted
      hn::StoreU(hn::TruncateTo(d16, hn::ShiftRight<16>(hn::IfThenElse(nan, quieted, rounded))), d16,
                 static_cast<uint16_t*>(out) + i);
    }
  }
  for (; i < n; ++i) store_from_f32(out, dtype, i, in[i]);
}

#else
void NarrowRow(const float* in, size_t n, DType dtype, void* out) {
  for (size_t i = 0; i < n; ++i) store_from_f32(out, dtype, i, in[i]);
}
void RmsNorm(const float* x, size_t rows, size_t n, const float* weight, float eps, float* out) {
  ref::rmsnorm(x, rows, n, weight, eps, out);
}
void Rope(float* x, size_t heads, size_t head_dim, const float* cos, const float* sin) {
  ref::rope(x, heads, head_dim, cos, sin);
}
void RopeAngles(const float* inv_freq, size_t count, size_t position, float* cos, float* sin) {
  ref::rope_angles(inv_freq, count, position, cos, sin);
}
void SiluMul(const float* gate, const float* up, size_t n, float* out) { ref::silu_mul(gate, up, n, out); }
void GeluTanhMul(const float* gate, const float* up, size_t n, float* out) { ref::gelu_tanh_mul(gate, up, n, out); }
void Softcap(float* x, size_t n, float cap) { ref::softcap(x, n, cap); }
#endif  // DITTO_SIMD_HAS_FMA

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace ditto::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ditto::kernels {

HWY_EXPORT(RmsNorm);
HWY_EXPORT(Rope);
HWY_EXPORT(RopeAngles);
HWY_EXPORT(SiluMul);
HWY_EXPORT(GeluTanhMul);
HWY_EXPORT(Softcap);
HWY_EXPORT(NarrowRow);
HWY_EXPORT(TargetName);

void rmsnorm(const float* x, size_t rows, size_t n, const float* weight, float eps, float* out) {
  HWY_DYNAMIC_DISPATCH(RmsNorm)(x, rows, n, weight, eps, out);
}
void rope(float* x, size_t heads, size_t head_dim, const float* cos, const float* sin) {
  HWY_DYNAMIC_DISPATCH(Rope)(x, heads, head_dim, cos, sin);
}
void rope_angles(const float* inv_freq, size_t count, size_t position, float* cos, float* sin) {
  HWY_DYNAMIC_DISPATCH(RopeAngles)(inv_freq, count, position, cos, sin);
}
namespace {
// Elements a thread takes at a time: a 16-row chunk of Gemma 3 270M's MLP (2,048 wide) is 8 such,
// and the calling thread alone took 3-6% of its prefill, the other waiting.
constexpr size_t kActivationSlice = 4096;

template <typename Activation>
void split_activation(Activation activation, const float* gate, const float* up, size_t n, float* out, int threads) {
  if (threads == 1 || n < 2 * kActivationSlice) return activation(gate, up, n, out);
  parallel_for(threads, (n + kActivationSlice - 1) / kActivationSlice, [&](size_t begin, size_t end) {
    const size_t first = begin * kActivationSlice, last = std::min(n, end * kActivationSlice);
    activation(gate + first, up + first, last - first, out + first);
  });
}
}  // namespace

void silu_mul(const float* gate, const float* up, size_t n, float* out, int threads) {
  split_activation(HWY_DYNAMIC_DISPATCH(SiluMul), gate, up, n, out, threads);
}
void gelu_tanh_mul(const float* gate, const float* up, size_t n, float* out, int threads) {
  split_activation(HWY_DYNAMIC_DISPATCH(GeluTanhMul), gate, up, n, out, threads);
}
void softcap(float* x, size_t n, float cap) { HWY_DYNAMIC_DISPATCH(Softcap)(x, n, cap); }
void write_kv(const ref::KVLayerView& cache, size_t block, size_t slot, const float* keys, const float* values) {
  for (size_t h = 0; h < cache.kv_heads; ++h) {
    const size_t at = cache.offset(block, h, slot);
    HWY_DYNAMIC_DISPATCH(NarrowRow)(keys + h * cache.head_dim, cache.head_dim, cache.dtype,
                                    static_cast<unsigned char*>(cache.k) + at);
    HWY_DYNAMIC_DISPATCH(NarrowRow)(values + h * cache.head_dim, cache.head_dim, cache.dtype,
                                    static_cast<unsigned char*>(cache.v) + at);
  }
}
std::string target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace ditto::kernels
#endif
