// SIMD causal attention over the paged KV cache: the reference's 16-lane dot products, softmax
// and per-dimension fma chains, vectorised; keys and values are read block by block. Head sizes that are not a multiple of 16 run the
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

// probs[h][at + i] = (q[h] . k_i) * scale for the KEYS consecutive keys at `keys` (one block's
// slots), in the 16-lane order.
template <size_t NH, size_t KEYS>
HWY_INLINE void ScoreKeys(DF d, const float* const* q, const unsigned char* keys, DType dtype, size_t head_dim,
                          float scale, float* const* probs, size_t at) {
  const size_t element = dtype_size(dtype);
  VF lanes[KEYS][NH][kLaneVectors];
  for (auto& key : lanes)
    for (auto& head : key)
      for (auto& lane : head) lane = hn::Zero(d);
  for (size_t d0 = 0; d0 < head_dim; d0 += 16)
    for (size_t v = 0; v < kLaneVectors; ++v) {
      const size_t dim = d0 + v * kLanesF;
      VF qv[NH];
      for (size_t h = 0; h < NH; ++h) qv[h] = hn::LoadU(d, q[h] + dim);
      for (size_t i = 0; i < KEYS; ++i) {
        const VF kv = LoadWidened(d, dtype, keys + (i * head_dim + dim) * element);
        for (size_t h = 0; h < NH; ++h) lanes[i][h][v] = hn::MulAdd(qv[h], kv, lanes[i][h][v]);
      }
    }
  for (size_t i = 0; i < KEYS; ++i)
    for (size_t h = 0; h < NH; ++h) probs[h][at + i] = FoldLanes(lanes[i][h]) * scale;
}

// Calls visit(start, count) for the runs of positions first .. end-1 that share a block of the
// cache: position start + s is slot start % block_size + s of block blocks[start / block_size].
template <class Visit>
HWY_INLINE void ForEachBlockRun(size_t first, size_t end, size_t block_size, const Visit& visit) {
  for (size_t start = first; start < end;) {
    const size_t count = std::min(block_size - start % block_size, end - start);
    visit(start, count);
    start += count;
  }
}

// out[h][d] = the fma chain over keys of probs[h][j - first] * v_j[d], per dimension, over
// positions j = first .. end-1 in increasing order whatever block holds them.
template <size_t NH>
HWY_INLINE void WeightedValues(DF d, const float* const* probs, const ref::KVLayerView& cache, const uint32_t* blocks,
                               size_t kv, size_t first, size_t end, float* const* out) {
  const size_t element = dtype_size(cache.dtype), head_dim = cache.head_dim;
  const auto* v_base = static_cast<const unsigned char*>(cache.v);
  for (size_t d0 = 0; d0 < head_dim; d0 += kOutputVectors * kLanesF) {
    const size_t vectors = std::min(kOutputVectors, (head_dim - d0) / kLanesF);
    VF acc[NH][kOutputVectors];
    for (auto& head : acc)
      for (auto& a : head) a = hn::Zero(d);
    ForEachBlockRun(first, end, cache.block_size, [&](size_t start, size_t count) {
      const unsigned char* run =
          v_base + cache.offset(blocks[start / cache.block_size], kv, start % cache.block_size) + d0 * element;
      for (size_t s = 0; s < count; ++s) {
        VF p[NH];
        for (size_t h = 0; h < NH; ++h) p[h] = hn::Set(d, probs[h][start - first + s]);
        const unsigned char* vj = run + s * head_dim * element;
        for (size_t v = 0; v < kOutputVectors; ++v) {
          if (v >= vectors) break;
          const VF values = LoadWidened(d, cache.dtype, vj + v * kLanesF * element);
          for (size_t h = 0; h < NH; ++h) acc[h][v] = hn::MulAdd(p[h], values, acc[h][v]);
        }
      }
    });
    for (size_t h = 0; h < NH; ++h)
      for (size_t v = 0; v < vectors; ++v) hn::StoreU(acc[h][v], d, out[h] + d0 + v * kLanesF);
  }
}

// NH query heads that share kv head `kv`, for one query row that sees positions first .. end-1.
template <size_t NH>
void AttendHeads(DF d, const float* const* q, const ref::KVLayerView& cache, const uint32_t* blocks, size_t kv,
                 size_t first, size_t end, float scale, float* const* probs, float* const* out) {
  const size_t element = dtype_size(cache.dtype);
  const auto* k_base = static_cast<const unsigned char*>(cache.k);
  const size_t key_bytes = cache.head_dim * element;
  ForEachBlockRun(first, end, cache.block_size, [&](size_t start, size_t count) {
    const unsigned char* run = k_base + cache.offset(blocks[start / cache.block_size], kv, start % cache.block_size);
    const size_t at = start - first;
    size_t s = 0;
    for (; s + kKeysPerStep <= count; s += kKeysPerStep)
      ScoreKeys<NH, kKeysPerStep>(d, q, run + s * key_bytes, cache.dtype, cache.head_dim, scale, probs, at + s);
    for (; s < count; ++s) ScoreKeys<NH, 1>(d, q, run + s * key_bytes, cache.dtype, cache.head_dim, scale, probs, at + s);
  });
  for (size_t h = 0; h < NH; ++h) Softmax(d, probs[h], end - first);
  WeightedValues<NH>(d, probs, cache, blocks, kv, first, end, out);
}

void Attention(const float* q, std::span<const ref::AttentionRow> rows, const ref::KVLayerView& cache, size_t heads,
               const ref::AttentionParams& params, float* out, int threads) {
  const size_t head_dim = cache.head_dim, kv_heads = cache.kv_heads;
  if (head_dim % 16 != 0) return ref::attention(q, rows, cache, heads, params, out, threads);
  const DF d;
  const size_t group = heads / kv_heads;
  const size_t passes = (group + kHeadsPerPass - 1) / kHeadsPerPass;
  const size_t width = heads * head_dim;
  size_t max_keys = 0;
  for (const ref::AttentionRow& row : rows) max_keys = std::max(max_keys, row.position + 1 - params.first_key(row.position));
  // One job: a query row, a kv head and up to kHeadsPerPass of its query heads.
  parallel_for(threads, rows.size() * kv_heads * passes, [&](size_t job_begin, size_t job_end) {
    std::vector<float> probs_storage(kHeadsPerPass * max_keys);
    for (size_t job = job_begin; job < job_end; ++job) {
      const size_t t = job / (kv_heads * passes), kv = job / passes % kv_heads, pass = job % passes;
      const size_t first_head = kv * group + pass * kHeadsPerPass;
      const size_t nh = std::min(kHeadsPerPass, kv * group + group - first_head);
      const size_t first = params.first_key(rows[t].position), end = rows[t].position + 1;
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
        AttendHeads<kHeadsPerPass>(d, q_heads, cache, rows[t].blocks, kv, first, end, params.scale, probs, out_heads);
      else
        AttendHeads<1>(d, q_heads, cache, rows[t].blocks, kv, first, end, params.scale, probs, out_heads);
    }
  });
}

#else
void Attention(const float* q, std::span<const ref::AttentionRow> rows, const ref::KVLayerView& cache, size_t heads,
               const ref::AttentionParams& params, float* out, int threads) {
  ref::attention(q, rows, cache, heads, params, out, threads);
}
#endif  // DITTO_SIMD_HAS_FMA
}  // namespace ditto::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ditto::kernels {

HWY_EXPORT(Attention);

void attention(const float* q, std::span<const ref::AttentionRow> rows, const ref::KVLayerView& cache, size_t heads,
               const ref::AttentionParams& params, float* out, int threads) {
  HWY_DYNAMIC_DISPATCH(Attention)(q, rows, cache, heads, params, out, threads);
}

}  // namespace ditto::kernels
#endif
