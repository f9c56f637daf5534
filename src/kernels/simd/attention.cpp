// SIMD causal attention over the KV cache: the reference's 16-lane dot products, softmax and
// per-dimension fma chains, vectorised. Head sizes that are not a multiple of 16 run the
// reference itself (real models use 64, 80, 96, 128, 256).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/ref/math.h"
#include "kernels/thread_pool.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/simd/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ditto::HWY_NAMESPACE {
#if DITTO_SIMD_HAS_FMA

constexpr size_t kLanesF = hn::MaxLanes(DF());
constexpr size_t kOutputVectors = 8;  // output dimensions kept in registers per pass over keys

// Softmax of probs[0 .. keys) in place: exp(s - max) summed in the 16-lane order, then divided.
HWY_INLINE void Softmax(DF d, float* probs, size_t keys) {
  float max_score = -INFINITY;
  for (size_t j = 0; j < keys; ++j) max_score = std::max(max_score, probs[j]);
  const VF max_v = hn::Set(d, max_score);
  VF lanes[kLaneVectors];
  for (auto& lane : lanes) lane = hn::Zero(d);
  size_t j = 0;
  for (; j + 16 <= keys; j += 16)
    for (size_t v = 0; v < kLaneVectors; ++v) {
      const VF e = Exp(d, hn::Sub(hn::LoadU(d, probs + j + v * kLanesF), max_v));
      hn::StoreU(e, d, probs + j + v * kLanesF);
      lanes[v] = hn::Add(lanes[v], e);
    }
  HWY_ALIGN float scalar_lanes[16];
  for (size_t v = 0; v < kLaneVectors; ++v) hn::Store(lanes[v], d, scalar_lanes + v * kLanesF);
  for (; j < keys; ++j) {
    probs[j] = ref::exp_f32(probs[j] - max_score);
    scalar_lanes[j % 16] = scalar_lanes[j % 16] + probs[j];
  }
  const float total = ref::fold_lanes(scalar_lanes);
  const VF total_v = hn::Set(d, total);
  j = 0;
  for (; j + kLanesF <= keys; j += kLanesF) hn::StoreU(hn::Div(hn::LoadU(d, probs + j), total_v), d, probs + j);
  for (; j < keys; ++j) probs[j] = probs[j] / total;
}

void Attention(const float* q, size_t rows, size_t first_pos, const ref::KVLayerView& cache, size_t heads,
               size_t kv_heads, size_t head_dim, float* out, int threads) {
  if (head_dim % 16 != 0)
    return ref::attention(q, rows, first_pos, cache, heads, kv_heads, head_dim, out, threads);
  const DF d;
  const size_t group = heads / kv_heads;
  const size_t element = dtype_size(cache.dtype);
  const float scale = float(1.0 / std::sqrt(double(head_dim)));
  const size_t width = heads * head_dim;
  parallel_for(threads, rows * heads, [&](size_t job_begin, size_t job_end) {
    std::vector<float> probs(first_pos + rows);
    for (size_t job = job_begin; job < job_end; ++job) {
      const size_t t = job / heads, h = job % heads, kv = h / group;
      const size_t keys = first_pos + t + 1;
      const float* qv = q + t * width + h * head_dim;
      const auto* k_base = static_cast<const unsigned char*>(cache.k) + kv * cache.capacity * head_dim * element;
      const auto* v_base = static_cast<const unsigned char*>(cache.v) + kv * cache.capacity * head_dim * element;

      for (size_t j = 0; j < keys; ++j) {
        const unsigned char* kj = k_base + j * head_dim * element;
        VF lanes[kLaneVectors];
        for (auto& lane : lanes) lane = hn::Zero(d);
        for (size_t d0 = 0; d0 < head_dim; d0 += 16)
          for (size_t v = 0; v < kLaneVectors; ++v) {
            const size_t at = d0 + v * kLanesF;
            lanes[v] = hn::MulAdd(hn::LoadU(d, qv + at), LoadWidened(d, cache.dtype, kj + at * element), lanes[v]);
          }
        probs[j] = FoldLanes(lanes) * scale;
      }
      Softmax(d, probs.data(), keys);

      float* o = out + t * width + h * head_dim;
      for (size_t d0 = 0; d0 < head_dim; d0 += kOutputVectors * kLanesF) {
        const size_t vectors = std::min(kOutputVectors, (head_dim - d0) / kLanesF);
        VF acc[kOutputVectors];
        for (size_t v = 0; v < kOutputVectors; ++v) acc[v] = hn::Zero(d);
        for (size_t j = 0; j < keys; ++j) {
          const VF p = hn::Set(d, probs[j]);
          const unsigned char* vj = v_base + (j * head_dim + d0) * element;
          for (size_t v = 0; v < vectors; ++v)
            acc[v] = hn::MulAdd(p, LoadWidened(d, cache.dtype, vj + v * kLanesF * element), acc[v]);
        }
        for (size_t v = 0; v < vectors; ++v) hn::StoreU(acc[v], d, o + d0 + v * kLanesF);
      }
    }
  });
}

#else
void Attention(const float* q, size_t rows, size_t first_pos, const ref::KVLayerView& cache, size_t heads,
               size_t kv_heads, size_t head_dim, float* out, int threads) {
  ref::attention(q, rows, first_pos, cache, heads, kv_heads, head_dim, out, threads);
}
#endif  // DITTO_SIMD_HAS_FMA
}  // namespace ditto::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ditto::kernels {

HWY_EXPORT(Attention);

void attention(const float* q, size_t rows, size_t first_pos, const ref::KVLayerView& cache, size_t heads,
               size_t kv_heads, size_t head_dim, float* out, int threads) {
  HWY_DYNAMIC_DISPATCH(Attention)(q, rows, first_pos, cache, heads, kv_heads, head_dim, out, threads);
}

}  // namespace ditto::kernels
#endif
