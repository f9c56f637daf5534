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

// Query heads of one GQA group handled together, so that each key and value load serves
// all of them; keys scored a few at a time, so that independent fma chains hide latency.
constexpr size_t kHeadsPerPass = kLanesF == 16 ? 2 : 1;
constexpr size_t kKeysPerStep = 4;

// probs[h][j] = (q[h] . k_j) * scale for KEYS keys from `first_key`, in the 16-lane order.
template <size_t NH, size_t KEYS>
HWY_INLINE void ScoreKeys(DF d, const float* const* q, const unsigned char* k_base, DType dtype, size_t head_dim,
                          size_t first_key, float scale, float* const* probs) {
  const size_t element = dtype_size(dtype);
  VF lanes[KEYS][NH][kLaneVectors];
  for (auto& key : lanes)
    for (auto& head : key)
      for (auto& lane : head) lane = hn::Zero(d);
  for (size_t d0 = 0; d0 < head_dim; d0 += 16)
    for (size_t v = 0; v < kLaneVectors; ++v) {
      const size_t at = d0 + v * kLanesF;
      VF qv[NH];
      for (size_t h = 0; h < NH; ++h) qv[h] = hn::LoadU(d, q[h] + at);
      for (size_t i = 0; i < KEYS; ++i) {
        const VF kv = LoadWidened(d, dtype, k_base + ((first_key + i) * head_dim + at) * element);
        for (size_t h = 0; h < NH; ++h) lanes[i][h][v] = hn::MulAdd(qv[h], kv, lanes[i][h][v]);
      }
    }
  for (size_t i = 0; i < KEYS; ++i)
    for (size_t h = 0; h < NH; ++h) probs[h][first_key + i] = FoldLanes(lanes[i][h]) * scale;
}

// out[h][d] = the fma chain over keys of probs[h][j] * v_j[d], per dimension.
template <size_t NH>
HWY_INLINE void WeightedValues(DF d, const float* const* probs, const unsigned char* v_base, DType dtype,
                               size_t head_dim, size_t keys, float* const* out) {
  const size_t element = dtype_size(dtype);
  for (size_t d0 = 0; d0 < head_dim; d0 += kOutputVectors * kLanesF) {
    const size_t vectors = std::min(kOutputVectors, (head_dim - d0) / kLanesF);
    VF acc[NH][kOutputVectors];
    for (auto& head : acc)
      for (auto& a : head) a = hn::Zero(d);
    for (size_t j = 0; j < keys; ++j) {
      VF p[NH];
      for (size_t h = 0; h < NH; ++h) p[h] = hn::Set(d, probs[h][j]);
      const unsigned char* vj = v_base + (j * head_dim + d0) * element;
      for (size_t v = 0; v < kOutputVectors; ++v) {
        if (v >= vectors) break;
        const VF values = LoadWidened(d, dtype, vj + v * kLanesF * element);
        for (size_t h = 0; h < NH; ++h) acc[h][v] = hn::MulAdd(p[h], values, acc[h][v]);
      }
    }
    for (size_t h = 0; h < NH; ++h)
      for (size_t v = 0; v < vectors; ++v) hn::StoreU(acc[h][v], d, out[h] + d0 + v * kLanesF);
  }
}

// NH query heads that share one kv head, for one query row that sees `keys` keys.
template <size_t NH>
void AttendHeads(DF d, const float* const* q, const unsigned char* k_base, const unsigned char* v_base, DType dtype,
                 size_t head_dim, size_t keys, float scale, float* const* probs, float* const* out) {
  size_t j = 0;
  for (; j + kKeysPerStep <= keys; j += kKeysPerStep)
    ScoreKeys<NH, kKeysPerStep>(d, q, k_base, dtype, head_dim, j, scale, probs);
  for (; j < keys; ++j) ScoreKeys<NH, 1>(d, q, k_base, dtype, head_dim, j, scale, probs);
  for (size_t h = 0; h < NH; ++h) Softmax(d, probs[h], keys);
  WeightedValues<NH>(d, probs, v_base, dtype, head_dim, keys, out);
}

void Attention(const float* q, size_t rows, size_t first_pos, const ref::KVLayerView& cache, size_t heads,
               size_t kv_heads, size_t head_dim, float* out, int threads) {
  if (head_dim % 16 != 0)
    return ref::attention(q, rows, first_pos, cache, heads, kv_heads, head_dim, out, threads);
  const DF d;
  const size_t group = heads / kv_heads;
  const size_t passes = (group + kHeadsPerPass - 1) / kHeadsPerPass;
  const size_t element = dtype_size(cache.dtype);
  const float scale = float(1.0 / std::sqrt(double(head_dim)));
  const size_t width = heads * head_dim;
  const size_t max_keys = first_pos + rows;
  // One job: a query row, a kv head and up to kHeadsPerPass of its query heads.
  parallel_for(threads, rows * kv_heads * passes, [&](size_t job_begin, size_t job_end) {
    std::vector<float> probs_storage(kHeadsPerPass * max_keys);
    for (size_t job = job_begin; job < job_end; ++job) {
      const size_t t = job / (kv_heads * passes), kv = job / passes % kv_heads, pass = job % passes;
      const size_t first_head = kv * group + pass * kHeadsPerPass;
      const size_t nh = std::min(kHeadsPerPass, kv * group + group - first_head);
      const size_t keys = first_pos + t + 1;
      const auto* k_base = static_cast<const unsigned char*>(cache.k) + kv * cache.capacity * head_dim * element;
      const auto* v_base = static_cast<const unsigned char*>(cache.v) + kv * cache.capacity * head_dim * element;
      const float* q_heads[kHeadsPerPass];
      float* probs[kHeadsPerPass];
      float* out_heads[kHeadsPerPass];
      for (size_t h = 0; h < kHeadsPerPass; ++h) {
        const size_t head = first_head + std::min(h, nh - 1);
        q_heads[h] = q + t * width + head * head_dim;
        probs[h] = probs_storage.data() + h * max_keys;
        out_heads[h] = out + t * width + head * head_dim;
      }
      if (nh == kHeadsPerPass)
        AttendHeads<kHeadsPerPass>(d, q_heads, k_base, v_base, cache.dtype, head_dim, keys, scale, probs, out_heads);
      else
        AttendHeads<1>(d, q_heads, k_base, v_base, cache.dtype, head_dim, keys, scale, probs, out_heads);
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
