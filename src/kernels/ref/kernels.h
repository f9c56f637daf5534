#pragma once
#include <cstddef>

#include "ditto/dtype.h"
#include "tensor/matrix.h"

// The scalar reference kernels: the specification of every bit ditto computes.
// docs/numerics.md states each reduction order; faster kernels must reproduce it exactly.
// `threads` only splits independent outputs, so it never changes a result.
namespace ditto::ref {

// y[m][n] = sum over k of x[m][k] * W[n][k], as one fma chain per output in increasing k,
// starting from +0.0f. x is rows x W.cols, y is rows x W.rows.
void matmul(const float* x, size_t rows, const MatrixView& w, float* y, int threads);

// Copies row `token` of the embedding matrix, widened to f32.
void embedding_row(const MatrixView& table, size_t token, float* out);

// For each of `rows` vectors of length n: out = (x * r) * weight with
// r = 1 / sqrt(sum16(x*x) / n + eps), sum16 being the 16-lane order of fold_lanes.
// out may alias x.
void rmsnorm(const float* x, size_t rows, size_t n, const float* weight, float eps, float* out);

// Rotate-half RoPE on `heads` vectors of length head_dim, in place, with the angles of one
// position: cos/sin hold head_dim/2 values.
void rope(float* x, size_t heads, size_t head_dim, const float* cos, const float* sin);

// out[i] = silu(gate[i]) * up[i] with silu(g) = g / (1 + exp(-g)).
void silu_mul(const float* gate, const float* up, size_t n, float* out);

// Cache of one layer, read at its own precision: element (kv_head, pos, d) of K lies at
// k + ((kv_head * capacity + pos) * head_dim + d) * dtype_size, and likewise V.
struct KVLayerView {
  DType dtype;
  size_t capacity;
  const void* k;
  const void* v;
};

// Causal attention with GQA. Query row t (of `rows`) sits at position first_pos + t and
// attends to cache positions 0 .. first_pos + t, which must already be written.
// q and out are rows x (heads * head_dim); query head h reads kv head h / (heads / kv_heads).
void attention(const float* q, size_t rows, size_t first_pos, const KVLayerView& cache,
               size_t heads, size_t kv_heads, size_t head_dim, float* out, int threads);

}  // namespace ditto::ref

namespace ditto::ref {

// The RoPE angles of one position, as transformers computes them in f32:
// inv_freq[i] = 1 / theta^(2i / head_dim), angle = position * inv_freq[i], then cos and sin
// (evaluated in double by math.h and rounded once to f32). cos/sin hold head_dim/2 values.
void rope_angles(double theta, size_t head_dim, size_t position, float* cos, float* sin);

}  // namespace ditto::ref
