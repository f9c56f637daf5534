#include <cmath>
#include <vector>

#include "kernels/ref/kernels.h"
#include "kernels/ref/math.h"
#include "kernels/thread_pool.h"

namespace ditto::ref {

void KVLayerView::write(size_t block, size_t slot, const float* keys, const float* values) const {
  const size_t element = dtype_size(dtype);
  for (size_t h = 0; h < kv_heads; ++h) {
    const size_t at = offset(block, h, slot) / element;
    for (size_t d = 0; d < head_dim; ++d) {
      store_from_f32(k, dtype, at + d, keys[h * head_dim + d]);
      store_from_f32(v, dtype, at + d, values[h * head_dim + d]);
    }
  }
}

float AttentionParams::inverse_sqrt_scale(double d) { return float(1.0 / std::sqrt(d)); }

void attention(const float* q, std::span<const AttentionRow> rows, const KVLayerView& cache, size_t heads,
               const AttentionParams& params, float* out, int threads) {
  const size_t head_dim = cache.head_dim;
  const size_t group = heads / cache.kv_heads;
  const size_t width = heads * head_dim;
  size_t max_keys = 0;
  for (const AttentionRow& row : rows) max_keys = std::max(max_keys, row.position + 1 - params.first_key(row.position));
  parallel_for(threads, rows.size() * heads, [&](size_t job_begin, size_t job_end) {
    std::vector<float> probs(max_keys);
    for (size_t job = job_begin; job < job_end; ++job) {
      const size_t t = job / heads;
      const size_t h = job % heads;
      const size_t kv = h / group;
      // The row sees positions first .. position; probs[i] is position first + i.
      const size_t first = params.first_key(rows[t].position);
      const size_t keys = rows[t].position + 1 - first;
      const float* qv = q + t * width + h * head_dim;
      // Key or value i of this row: its block from the row's table, then its slot.
      const auto at = [&](const void* base, size_t i) {
        const size_t j = first + i;
        return static_cast<const unsigned char*>(base) +
               cache.offset(rows[t].blocks[j / cache.block_size], kv, j % cache.block_size);
      };

      // Scores: 16-lane dot products, scaled after the sum.
      float max_score = -INFINITY;
      for (size_t i = 0; i < keys; ++i) {
        const void* ki = at(cache.k, i);
        float lanes[kLanes] = {};
        for (size_t d = 0; d < head_dim; ++d)
          lanes[d % kLanes] = std::fma(qv[d], load_as_f32(ki, cache.dtype, d), lanes[d % kLanes]);
        const float score = fold_lanes(lanes) * params.scale;
        probs[i] = score;
        if (score > max_score) max_score = score;
      }
      // Softmax: exponentials summed in the 16-lane order over the keys seen.
      softmax_f32(probs.data(), keys, max_score);
      // Output: one fma chain per dimension over key positions in increasing order.
      float* o = out + t * width + h * head_dim;
      for (size_t d = 0; d < head_dim; ++d) o[d] = 0.0f;
      for (size_t i = 0; i < keys; ++i) {
        const void* vi = at(cache.v, i);
        for (size_t d = 0; d < head_dim; ++d) o[d] = std::fma(probs[i], load_as_f32(vi, cache.dtype, d), o[d]);
      }
    }
  });
}

}  // namespace ditto::ref
