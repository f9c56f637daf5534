// Per-target building blocks of the SIMD kernels (Highway). Included once per target by
// each kernel file. Every helper follows docs/numerics.md exactly.

// The contract needs a fused multiply-add: only these targets get SIMD kernels; the others
// (SSE4, scalar) run the reference. Evaluated where used, i.e. per target.
#ifndef DITTO_SIMD_HAS_FMA
#define DITTO_SIMD_HAS_FMA (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
#endif

#if defined(DITTO_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DITTO_SIMD_INL_H_
#undef DITTO_SIMD_INL_H_
#else
#define DITTO_SIMD_INL_H_
#endif

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "ditto/dtype.h"
#include "tensor/matrix.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ditto::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if DITTO_SIMD_HAS_FMA
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Loads Lanes(d) consecutive elements of `dtype` at `data` and widens them to f32 exactly.
HWY_INLINE VF LoadWidened(DF d, DType dtype, const void* data) {
  switch (dtype) {
    case DType::BF16: {
      const hn::Rebind<hwy::bfloat16_t, DF> dbf;
      return hn::PromoteTo(d, hn::LoadU(dbf, static_cast<const hwy::bfloat16_t*>(data)));
    }
    case DType::F16: {
      const hn::Rebind<hwy::float16_t, DF> dh;
      return hn::PromoteTo(d, hn::LoadU(dh, static_cast<const hwy::float16_t*>(data)));
    }
    case DType::F32: break;
    default: break;  // never here: quantised tiles are read with DequantizeLanes (matmul.cpp)
  }
  return hn::LoadU(d, static_cast<const float*>(data));
}

// Calls visit(std::integral_constant<DType, T>{}) for the type T of a matrix's weights, so
// that a kernel is compiled for each type.
template <class Visit>
HWY_INLINE decltype(auto) WithWeightType(DType dtype, const Visit& visit) {
  switch (dtype) {
    case DType::BF16: return visit(std::integral_constant<DType, DType::BF16>{});
    case DType::F16: return visit(std::integral_constant<DType, DType::F16>{});
    case DType::Q8_0: return visit(std::integral_constant<DType, DType::Q8_0>{});
    case DType::Q4_0: return visit(std::integral_constant<DType, DType::Q4_0>{});
    case DType::Q4_1: return visit(std::integral_constant<DType, DType::Q4_1>{});
    case DType::Q5_0: return visit(std::integral_constant<DType, DType::Q5_0>{});
    case DType::Q5_1: return visit(std::integral_constant<DType, DType::Q5_1>{});
    case DType::Q2_K: return visit(std::integral_constant<DType, DType::Q2_K>{});
    case DType::Q3_K: return visit(std::integral_constant<DType, DType::Q3_K>{});
    case DType::Q4_K: return visit(std::integral_constant<DType, DType::Q4_K>{});
    case DType::Q5_K: return visit(std::integral_constant<DType, DType::Q5_K>{});
    case DType::Q6_K: return visit(std::integral_constant<DType, DType::Q6_K>{});
    case DType::F32: break;
  }
  return visit(std::integral_constant<DType, DType::F32>{});
}

// Memory a tile asks the CPU to start loading while it computes (the weights of the next panel
// group, which then stream in meanwhile): `lines` cache lines from `start`.
struct Prefetch {
  const unsigned char* start = nullptr;
  size_t lines = 0;

  // The next `count` lines (fewer where fewer are left), no longer this one's: how the row tiles
  // of a group share the prefetching of the next.
  Prefetch take(size_t count) {
    const Prefetch part{start, std::min(count, lines)};
    start += part.lines * 64;
    lines -= part.lines;
    return part;
  }
  // An even share of the lines left among `parts` parts still to run, this one included: spread
  // over all of a group's row tiles, the loads wait less for free miss buffers than when the
  // first tile issues them all (exact 16-row chunks on AVX2, SmolLM2 Q4_1 on Zen 4: 0.78 of the
  // whole prompt's speed with the first tile prefetching, 0.85 spread).
  Prefetch share(size_t parts) { return take((lines + parts - 1) / parts); }
};

// Asks for the cache line at p into L2 (prefetcht1), not L1: streams read a few blocks ahead wait
// less there (decode of weights, keys and values; into L1 the Zen 4 decodes ran 9-40% slower).
HWY_INLINE void PrefetchIntoL2(const void* p) { __builtin_prefetch(p, 0, 2); }

// How many tiles ahead a decode matmul tile (one row, or the few of sequences decoding together)
// asks for each panel's quantised weights, into L2.
constexpr size_t kDecodeAheadTiles = 4;

// Step `step` of `steps` of a loop that spreads the prefetching of `prefetch` evenly over its
// steps, into L2.
HWY_INLINE void PrefetchStep(Prefetch prefetch, size_t step, size_t steps) {
  const size_t per_step = (prefetch.lines + steps - 1) / steps;
  for (size_t line = step * per_step; line < std::min(prefetch.lines, (step + 1) * per_step); ++line)
    PrefetchIntoL2(prefetch.start + line * 64);
}

// Panels first .. first+count-1 of w, those that exist (none past the last).
inline Prefetch PanelsAhead(const MatrixView& w, size_t first, size_t count) {
  first = std::min(first, w.panels());
  const size_t end = std::min(first + count, w.panels());
  const auto* start = static_cast<const unsigned char*>(w.panel(first));
  return {start, size_t(static_cast<const unsigned char*>(w.panel(end)) - start) / 64};
}

// Writes the lanes of v to y, of which only the first `valid` exist.
HWY_INLINE void StoreOutputs(DF d, VF v, float* y, size_t valid) {
  if (valid >= hn::Lanes(d)) return hn::StoreU(v, d, y);
  HWY_ALIGN float lanes[hn::MaxLanes(DF())];
  hn::Store(v, d, lanes);
  std::copy(lanes, lanes + valid, y);
}

// Transposes an L x L block of floats held as rows (L = the lanes of a vector, 8 or 16): 4 x 4
// transposes inside each 128-bit block, then the blocks themselves.
HWY_INLINE void Transpose(DF d, VF (&m)[hn::MaxLanes(DF())]) {
  const hn::Repartition<uint64_t, DF> du;
  constexpr size_t kBlocks = hn::MaxLanes(DF()) / 4;
  VF u[4][kBlocks];  // u[c][g]: rows 4g .. 4g + 3 at column 4b + c of block b
  for (size_t g = 0; g < kBlocks; ++g) {
    const VF* r = m + 4 * g;
    const auto t0 = hn::BitCast(du, hn::InterleaveLower(d, r[0], r[1])), t1 = hn::BitCast(du, hn::InterleaveUpper(d, r[0], r[1]));
    const auto t2 = hn::BitCast(du, hn::InterleaveLower(d, r[2], r[3])), t3 = hn::BitCast(du, hn::InterleaveUpper(d, r[2], r[3]));
    u[0][g] = hn::BitCast(d, hn::InterleaveLower(du, t0, t2));
    u[1][g] = hn::BitCast(d, hn::InterleaveUpper(du, t0, t2));
    u[2][g] = hn::BitCast(d, hn::InterleaveLower(du, t1, t3));
    u[3][g] = hn::BitCast(d, hn::InterleaveUpper(du, t1, t3));
  }
  for (size_t c = 0; c < 4; ++c) {
    if constexpr (kBlocks == 2) {
      m[c] = hn::ConcatLowerLower(d, u[c][1], u[c][0]);
      m[4 + c] = hn::ConcatUpperUpper(d, u[c][1], u[c][0]);
    } else {
      const VF v0 = hn::OddEvenBlocks(hn::SwapAdjacentBlocks(u[c][1]), u[c][0]);
      const VF v1 = hn::OddEvenBlocks(u[c][1], hn::SwapAdjacentBlocks(u[c][0]));
      const VF v2 = hn::OddEvenBlocks(hn::SwapAdjacentBlocks(u[c][3]), u[c][2]);
      const VF v3 = hn::OddEvenBlocks(u[c][3], hn::SwapAdjacentBlocks(u[c][2]));
      m[c] = hn::ConcatLowerLower(d, v2, v0);
      m[4 + c] = hn::ConcatLowerLower(d, v3, v1);
      m[8 + c] = hn::ConcatUpperUpper(d, v2, v0);
      m[12 + c] = hn::ConcatUpperUpper(d, v3, v1);
    }
  }
}

// Lane folding of the 16-lane sum: lane[j] += lane[j + w] for w = 8, 4, 2, 1.
template <class D>
HWY_INLINE float FoldVector(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    return FoldVector(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    (void)d;
    v = hn::Add(v, hn::Shuffle1032(v));
    v = hn::Add(v, hn::Shuffle2301(v));
    return hn::GetLane(v);
  }
}

// The 16 virtual lanes as kLaneVectors registers: vector i holds lanes i*L .. i*L+L-1.
constexpr size_t kLaneVectors = 16 / hn::MaxLanes(DF());
static_assert(kLaneVectors * hn::MaxLanes(DF()) == 16, "the 16-lane order needs 4, 8 or 16 lanes");

HWY_INLINE float FoldLanes(VF (&lanes)[kLaneVectors]) {
  for (size_t width = kLaneVectors / 2; width >= 1; width /= 2)
    for (size_t i = 0; i < width; ++i) lanes[i] = hn::Add(lanes[i], lanes[i + width]);
  return FoldVector(DF(), lanes[0]);
}

// The reduction and polynomial of exp_f32 (docs/numerics.md), lane by lane: with
// n = floor(x / ln 2 + 1/2) and r = x - n ln 2, returns p ~ e^r, so that e^x = p * 2^n.
HWY_INLINE VF ExpPolynomial(DF d, VF x, VF& n) {
  n = hn::Floor(hn::Add(hn::Mul(x, hn::Set(d, 1.44269502162933349609375f)), hn::Set(d, 0.5f)));
  const VF minus_n = hn::Neg(n);
  VF r = hn::MulAdd(minus_n, hn::Set(d, 0.693145751953125f), x);
  r = hn::MulAdd(minus_n, hn::Set(d, 1.428606765330187045e-06f), r);
  VF p = hn::Set(d, 1.98412698e-4f);
  p = hn::MulAdd(p, r, hn::Set(d, 1.38888889e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 8.33333333e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.16666667e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.66666667e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.5f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  return hn::MulAdd(p, r, hn::Set(d, 1.0f));
}

// exp_f32 of docs/numerics.md, lane by lane, operation for operation.
HWY_INLINE VF Exp(DF d, VF x) {
  const hn::RebindToSigned<DF> di;
  VF n;
  const VF p = ExpPolynomial(d, x, n);
  const auto half = hn::ConvertTo(di, hn::Trunc(hn::Mul(n, hn::Set(d, 0.5f))));
  const auto rest = hn::Sub(hn::ConvertTo(di, n), half);
  const auto bias = hn::Set(di, 127);
  const VF scaled = hn::Mul(hn::Mul(p, hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(half, bias)))),
                            hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(rest, bias))));
  VF result = hn::IfThenElse(hn::Gt(x, hn::Set(d, 88.72283935546875f)), hn::Inf(d), scaled);
  result = hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, -104.0f)), result);
  return hn::IfThenElse(hn::IsNaN(x), x, result);
}

// Exp's bits for lanes known to lie in [-87, 0], as a softmax's shifted scores mostly do: there
// n >= -126, so 2^n is a normal float and one multiply by it rounds p * 2^n as Exp's two
// multiplies (by 2^(n/2) and 2^(n - n/2), exact until the last) do, and no range needs selecting.
HWY_INLINE VF ExpNonPositive(DF d, VF x) {
  const hn::RebindToSigned<DF> di;
  VF n;
  const VF p = ExpPolynomial(d, x, n);
  return hn::Mul(p, hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)))));
}

// tanh_f32 of docs/numerics.md, lane by lane: both branches computed, one selected.
HWY_INLINE VF Tanh(DF d, VF x) {
  const VF a = hn::Abs(x);
  const VF s = hn::Mul(a, a);
  VF p = hn::Set(d, -5.70498872745e-3f);
  p = hn::MulAdd(p, s, hn::Set(d, 2.06390887954e-2f));
  p = hn::MulAdd(p, s, hn::Set(d, -5.37397155531e-2f));
  p = hn::MulAdd(p, s, hn::Set(d, 1.33314422036e-1f));
  p = hn::MulAdd(p, s, hn::Set(d, -3.33332819422e-1f));
  const VF small = hn::MulAdd(hn::Mul(p, s), a, a);
  const VF one = hn::Set(d, 1.0f);
  const VF large = hn::Sub(one, hn::Div(hn::Set(d, 2.0f), hn::Add(Exp(d, hn::Add(a, a)), one)));
  return hn::CopySign(hn::IfThenElse(hn::Lt(a, hn::Set(d, 0.625f)), small, large), x);
}

#endif  // DITTO_SIMD_HAS_FMA
}  // namespace ditto::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif
