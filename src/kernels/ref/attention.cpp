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

void attention(const float* q, std::span<const AttentionRow> rows, const KVLayerView& cache, size_t heads, float* out,
               int threads) {
  const size_t head_dim = cache.head_dim;
  const size_t group = heads / cache.kv_heads;
  const float scale = float(1.0 / std::sqrt(double(head_dim)));
  const size_t width = heads * head_dim;
  size_t max_keys = 0;
  for (const AttentionRow& row : rows) max_keys = std::max(max_keys, row.position + 1);
  parallel_for(threads, rows.size() * heads, [&](size_t job_begin, size_t job_end) {
    std::vector<float> probs(max_keys);
    for (size_t job = job_begin; job < job_end; ++job) {
      const size_t t = job / heads;
      const size_t h = job % heads;
      const size_t kv = h / group;
      const size_t keys = rows[t].position + 1;
      const float* qv = q + t * width + h * head_dim;
      // Key or value j of this head: its block from the row's table, then its slot.
      const auto at = [&](const void* base, size_t j) {
        return static_cast<const unsigned char*>(base) +
               cache.offset(rows[t].blocks[j / cache.block_size], kv, j % cache.block_size);
      };

      // Scores: 16-lane dot products, scaled after the sum.
      float max_score = -INFINITY;
      for (size_t j = 0; j < keys; ++j) {
        const void* kj = at(cache.k, j);
        float lanes[kLanes] = {};
        for (size_t d = 0; d < head_dim; ++d)
          lanes[d % kLanes] = std::fma(qv[d], load_as_f32(kj, cache.dtype, d), lanes[d % kLanes]);
        const float score = fold_lanes(lanes) * scale;
        probs[j] = score;
        if (score > max_score) max_score = score;
      }
      // Softmax: exponentials summed in the 16-lane order over key positions.
      float lanes[kLanes] = {};
      for (size_t j = 0; j < keys; ++j) {
        probs[j] = exp_f32(probs[j] - max_score);
        lanes[j % kLanes] = lanes[j % kLanes] + probs[j];
      }
      const float total = fold_lanes(lanes);
      for (size_t j = 0; j < keys; ++j) probs[j] = probs[j] / total;
      // Output: one fma chain per dimension over key positions in increasing order.
      float* o = out + t * width + h * head_dim;
      for (size_t d = 0; d < head_dim; ++d) o[d] = 0.0f;
      for (size_t j = 0; j < keys; ++j) {
        const void* vj = at(cache.v, j);
        for (size_t d = 0; d < head_dim; ++d) o[d] = std::fma(probs[j], load_as_f32(vj, cache.dtype, d), o[d]);
      }
    }
  });
}

}  // namespace ditto::ref
