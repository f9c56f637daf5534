#include <cmath>
#include <vector>

#include "kernels/ref/kernels.h"
#include "kernels/ref/math.h"
#include "kernels/thread_pool.h"

namespace ditto::ref {

void attention(const float* q, size_t rows, size_t first_pos, const KVLayerView& cache,
               size_t heads, size_t kv_heads, size_t head_dim, float* out, int threads) {
  const size_t group = heads / kv_heads;
  const size_t element = dtype_size(cache.dtype);
  const float scale = float(1.0 / std::sqrt(double(head_dim)));
  const size_t width = heads * head_dim;
  parallel_for(threads, rows * heads, [&](size_t job_begin, size_t job_end) {
    std::vector<float> probs(first_pos + rows);
    for (size_t job = job_begin; job < job_end; ++job) {
      const size_t t = job / heads;
      const size_t h = job % heads;
      const size_t kv = h / group;
      const size_t keys = first_pos + t + 1;
      const float* qv = q + t * width + h * head_dim;
      const auto* k_base = static_cast<const unsigned char*>(cache.k) + kv * cache.capacity * head_dim * element;
      const auto* v_base = static_cast<const unsigned char*>(cache.v) + kv * cache.capacity * head_dim * element;

      // Scores: 16-lane dot products, scaled after the sum.
      float max_score = -INFINITY;
      for (size_t j = 0; j < keys; ++j) {
        const void* kj = k_base + j * head_dim * element;
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
        const void* vj = v_base + j * head_dim * element;
        for (size_t d = 0; d < head_dim; ++d) o[d] = std::fma(probs[j], load_as_f32(vj, cache.dtype, d), o[d]);
      }
    }
  });
}

}  // namespace ditto::ref
