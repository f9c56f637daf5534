// SIMD kernels over one row of logits for the sampler. Their results are exact (maximum,
// index, set, integer sum), so vectorising cannot change them; the tails run the reference.
#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"
#include "kernels/ref/math.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/logits.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/simd/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ditto::HWY_NAMESPACE {
#if DITTO_SIMD_HAS_FMA

constexpr size_t kLanesF = hn::MaxLanes(DF());

float BlockMax(const float* x, size_t n, float* maxima) {
  const DF d;
  static_assert(ref::kLogitsBlock % kLanesF == 0, "a block is whole vectors");
  float best = x[0];
  auto finite = hn::IsFinite(hn::Set(d, x[0]));
  bool finite_tail = true;
  for (size_t start = 0; start < n; start += ref::kLogitsBlock) {
    const size_t end = std::min(n, start + ref::kLogitsBlock);
    VF block_v = hn::Set(d, x[start]);
    size_t i = start;
    for (; i + kLanesF <= end; i += kLanesF) {
      const VF v = hn::LoadU(d, x + i);
      block_v = hn::Max(block_v, v);
      finite = hn::And(finite, hn::IsFinite(v));
    }
    float block = hn::GetLane(hn::MaxOfLanes(d, block_v));
    for (; i < end; ++i) {
      finite_tail = finite_tail && std::isfinite(x[i]);
      block = x[i] > block ? x[i] : block;
    }
    maxima[start / ref::kLogitsBlock] = block;
    best = block > best ? block : best;
  }
  return hn::AllTrue(d, finite) && finite_tail ? best : NAN;
}

size_t FirstIndexOf(const float* x, size_t n, float value) {
  const DF d;
  const VF target = hn::Set(d, value);
  size_t i = 0;
  for (; i + kLanesF <= n; i += kLanesF) {
    const intptr_t lane = hn::FindFirstTrue(d, hn::Eq(hn::LoadU(d, x + i), target));
    if (lane >= 0) return i + size_t(lane);
  }
  return i + ref::first_index_of(x + i, n - i, value);
}

size_t IndicesInRange(const float* x, size_t n, float low, float high, uint32_t* ids) {
  const DF d;
  const hn::RebindToUnsigned<DF> du;
  const VF low_v = hn::Set(d, low), high_v = hn::Set(d, high);
  auto index = hn::Iota(du, 0);
  const auto step = hn::Set(du, uint32_t(kLanesF));
  size_t count = 0, i = 0;
  for (; i + kLanesF <= n; i += kLanesF, index = hn::Add(index, step)) {
    const VF v = hn::LoadU(d, x + i);
    const auto keep = hn::And(hn::Le(low_v, v), hn::Lt(v, high_v));
    if (!hn::AllFalse(d, keep)) count += hn::CompressBlendedStore(index, hn::RebindMask(du, keep), du, ids + count);
  }
  for (; i < n; ++i)
    if (low <= x[i] && x[i] < high) ids[count++] = uint32_t(i);
  return count;
}

// ref::sampling_weight of 16 (or 8) logits as floats holding integers: for
// x = (z - max) * inverse_temperature >= kNoWeightBelow, exp_f32(x) = p * 2^n is a normal number,
// so p * 2^(n + 44) is exactly exp_f32(x) * 2^44, and its floor the weight; below, the weight is 0
// (as ref::weight_of gives: tests/sampler_test.cpp checks every such float).
struct Weights {
  VF max, inverse_temperature;
  HWY_INLINE VF operator()(const float* z) const {
    const DF d;
    const hn::RebindToSigned<DF> di32;
    const VF x = hn::Mul(hn::Sub(hn::LoadU(d, z), max), inverse_temperature);
    VF power;
    const VF p = ExpPolynomial(d, x, power);
    // power + 1.5 * 2^23 holds the integer power in its low bits.
    const auto exponent = hn::Sub(hn::BitCast(di32, hn::Add(power, hn::Set(d, 12582912.0f))), hn::Set(di32, 0x4B400000));
    const VF scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(exponent, hn::Set(di32, 127 + ref::kWeightBits))));
    return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, ref::kNoWeightBelow)), hn::Floor(hn::Mul(p, scale)));
  }
};

// The weights are summed in f64 lanes, exactly (integers below 2^53), and moved to an integer
// sum every kFlush elements, before any lane can reach 2^53.
uint64_t SumOfWeights(const float* z, size_t n, float max, float inverse_temperature) {
  const DF d;
  const hn::Half<DF> dh;
  const hn::Rebind<double, decltype(dh)> dd;
  const hn::RebindToSigned<decltype(dd)> di;
  constexpr size_t kFlush = 2048;  // each f64 lane then holds at most 128 weights <= 2^44
  const Weights weights{hn::Set(d, max), hn::Set(d, inverse_temperature)};
  auto sum = hn::Zero(di);
  size_t i = 0;
  while (i + kLanesF <= n) {
    auto low = hn::Zero(dd), high = hn::Zero(dd);
    for (const size_t end = std::min(n, i + kFlush); i + kLanesF <= end; i += kLanesF) {
      const VF w = weights(z + i);
      low = hn::Add(low, hn::PromoteTo(dd, hn::LowerHalf(dh, w)));
      high = hn::Add(high, hn::PromoteTo(dd, hn::UpperHalf(dh, w)));
    }
    sum = hn::Add(sum, hn::Add(hn::ConvertTo(di, low), hn::ConvertTo(di, high)));
  }
  return uint64_t(hn::GetLane(hn::SumOfLanes(di, sum))) + ref::sum_of_weights(z + i, n - i, max, inverse_temperature);
}

void SamplingWeights(const float* z, size_t n, float max, float inverse_temperature, uint64_t* out) {
  const DF d;
  const hn::Half<DF> dh;
  const hn::Rebind<double, decltype(dh)> dd;
  const hn::RebindToSigned<decltype(dd)> di;
  const hn::RebindToUnsigned<decltype(dd)> du;
  const Weights weights{hn::Set(d, max), hn::Set(d, inverse_temperature)};
  size_t i = 0;
  for (; i + kLanesF <= n; i += kLanesF) {
    const VF w = weights(z + i);
    hn::StoreU(hn::BitCast(du, hn::ConvertTo(di, hn::PromoteTo(dd, hn::LowerHalf(dh, w)))), du, out + i);
    hn::StoreU(hn::BitCast(du, hn::ConvertTo(di, hn::PromoteTo(dd, hn::UpperHalf(dh, w)))), du, out + i + kLanesF / 2);
  }
  ref::sampling_weights(z + i, n - i, max, inverse_temperature, out + i);
}

#else
float BlockMax(const float* x, size_t n, float* maxima) { return ref::block_max(x, n, maxima); }
size_t FirstIndexOf(const float* x, size_t n, float value) { return ref::first_index_of(x, n, value); }
size_t IndicesInRange(const float* x, size_t n, float low, float high, uint32_t* ids) {
  return ref::indices_in_range(x, n, low, high, ids);
}
uint64_t SumOfWeights(const float* z, size_t n, float max, float inverse_temperature) {
  return ref::sum_of_weights(z, n, max, inverse_temperature);
}
void SamplingWeights(const float* z, size_t n, float max, float inverse_temperature, uint64_t* weights) {
  ref::sampling_weights(z, n, max, inverse_temperature, weights);
}
#endif  // DITTO_SIMD_HAS_FMA

}  // namespace ditto::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ditto::kernels {

HWY_EXPORT(BlockMax);
HWY_EXPORT(FirstIndexOf);
HWY_EXPORT(IndicesInRange);
HWY_EXPORT(SumOfWeights);
HWY_EXPORT(SamplingWeights);

float block_max(const float* x, size_t n, float* maxima) { return HWY_DYNAMIC_DISPATCH(BlockMax)(x, n, maxima); }
size_t first_index_of(const float* x, size_t n, float value) { return HWY_DYNAMIC_DISPATCH(FirstIndexOf)(x, n, value); }
size_t indices_in_range(const float* x, size_t n, float low, float high, uint32_t* ids) {
  return HWY_DYNAMIC_DISPATCH(IndicesInRange)(x, n, low, high, ids);
}
uint64_t sum_of_weights(const float* z, size_t n, float max, float inverse_temperature) {
  return HWY_DYNAMIC_DISPATCH(SumOfWeights)(z, n, max, inverse_temperature);
}
void sampling_weights(const float* z, size_t n, float max, float inverse_temperature, uint64_t* weights) {
  HWY_DYNAMIC_DISPATCH(SamplingWeights)(z, n, max, inverse_temperature, weights);
}

}  // namespace ditto::kernels
#endif
