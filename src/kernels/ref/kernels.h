#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ditto/dtype.h"
#include "tensor/matrix.h"

// The scalar reference kernels: the specification of every bit ditto computes.
// docs/numerics.md states each reduction order; faster kernels must reproduce it exactly.
// `threads` only splits independent outputs, so it never changes a result.
namespace ditto::ref {

// y[m][n] = sum over k of x[m][k] * W[n][k], as one fma chain per output in increasing k,
// starting from +0.0f. x is rows x W.cols, y is rows x W.rows. A matrix packed for the int8
// numerics (w.numerics == Int8) computes matmul_int8 instead.
void matmul(const float* x, size_t rows, const MatrixView& w, float* y, int threads);

// y[m][n] = y[m][n] + bias[n] for `rows` rows of n values: a projection's bias (Qwen2's q, k and
// v), added after its matmul.
void add_bias(float* y, size_t rows, size_t n, const float* bias);

// The router of a mixture of experts, for one row of `experts` logits: p = softmax(logits)
// (the maximum m, e_i = exp_f32(l_i - m), total = sum16 of e with +, p_i = e_i / total); the k
// largest p, a tie going to the lower expert index; with `normalize`, each of those divided by
// their sum (added from +0.0f in decreasing order of p). Writes the k chosen experts to `chosen`
// in increasing index order, and their weights in the same order to `weights`.
void route_top_k(const float* logits, size_t experts, size_t k, bool normalize, uint32_t* chosen, float* weights);

// The inputs of the int8 numerics (docs/numerics-quant.md): each row of `cols` floats (a
// multiple of 32) rounded to int8 in blocks of 32 inputs, with each block's f32 scale, and for
// each group of `group` inputs (32, or 16 for Q2_K, Q3_K, Q6_K) the sum of its int8 values and
// that sum times its block's scale, as the minimums of a quantised matrix need it.
struct Int8Rows {
  size_t rows = 0, cols = 0, group = 32;
  std::vector<int8_t> values;      // rows x cols
  std::vector<float> scales;       // rows x cols / 32
  std::vector<int32_t> sums;       // rows x cols / group
  std::vector<float> scaled_sums;  // rows x cols / group: float(sum) * its block's scale

  // Room for `rows` rows (and `padding` more of zeros after them, for kernels that compute
  // rows in tiles): the buffers keep their memory from call to call.
  void resize(size_t rows, size_t cols, size_t group, size_t padding = 0);
  size_t blocks() const { return cols / 32; }
  size_t groups() const { return cols / group; }
};

// Rounds the block of 32 inputs at x to int8 values q[0 .. 31]; returns the scale:
// with a = the largest |x_i|, scale = a / 127 and q_i = x_i / scale rounded to the nearest
// integer, ties to even, after clamping to [-127, 127]. If a block holds an infinity or NaN its
// scale is NaN and its values 0; if a / 127 is 0 (a = 0, or a at most 63 times the smallest
// subnormal, 2^-149), its scale and values are 0.
float quantize_block(const float* x, int8_t* q);

// Fills `out` with the int8 rows of x (rows x cols): every block by quantize_block.
void quantize_rows(const float* x, size_t rows, size_t cols, size_t group, Int8Rows& out);

// The int8 numerics' matmul of a matrix packed for them: the rows of x quantised by
// quantize_rows, then per output, over the groups g of the row in increasing order, from
// acc = +0.0f: the integer dot product P_g of the group's int8 inputs and entries (exact),
// acc = fma(float(P_g), scale_g * block_scale, acc), and for types with a minimum
// acc = fma(+-minimum_g, scaled_sum_g, acc) (+ where the type adds its minimum, - where it
// subtracts it).
void matmul_int8(const float* x, size_t rows, const MatrixView& w, float* y, int threads);

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

// The tanh approximation of GELU, as torch computes gelu(g, approximate="tanh") (transformers'
// gelu_pytorch_tanh): (0.5 * g) * (1 + tanh_f32(kBeta * (g + kKappa * ((g * g) * g)))), each
// operation rounded to f32, with kBeta = sqrt(2 / pi) and kKappa = 0.044715 as f32.
inline constexpr float kGeluBeta = float(1.41421356237309504880 * 1.12837916709551257390 * 0.5);
inline constexpr float kGeluKappa = 0.044715f;
float gelu_tanh(float g);

// out[i] = gelu_tanh(gate[i]) * up[i].
void gelu_tanh_mul(const float* gate, const float* up, size_t n, float* out);

// x[i] = tanh_f32(x[i] / cap) * cap, in place: the logit softcapping of Gemma's configs.
void softcap(float* x, size_t n, float cap);

// One layer of the paged KV cache, at the cache's own precision: the one definition of its
// layout. Positions live in blocks of `block_size`; element (block b, kv head h, slot s,
// dimension d) of the keys lies at k + (((b * kv_heads + h) * block_size + s) * head_dim + d)
// * dtype_size(dtype), and likewise the values. So one head's keys in a block are contiguous,
// and a sequence's positions may lie in any blocks: its block table says which.
struct KVLayerView {
  DType dtype = DType::F32;
  size_t kv_heads = 0, head_dim = 0, block_size = 0;
  void* k = nullptr;
  void* v = nullptr;

  size_t block_bytes() const { return kv_heads * block_size * head_dim * dtype_size(dtype); }
  // Byte offset of (block, kv head, slot) from k or v.
  size_t offset(size_t block, size_t head, size_t slot) const {
    return ((block * kv_heads + head) * block_size + slot) * head_dim * dtype_size(dtype);
  }
  // Rounds one position's keys and values (kv_heads * head_dim each) to the cache dtype and
  // stores them in `slot` of `block`.
  void write(size_t block, size_t slot, const float* keys, const float* values) const;
};

// A query row of attention: it sits at `position` of its sequence and attends to that
// sequence's positions up to `position` (AttentionParams says from which), position p being in
// slot p % block_size of block blocks[p / block_size]. Those positions must already be written;
// blocks before the first position attended are not read.
struct AttentionRow {
  const uint32_t* blocks;
  size_t position;
};

// How a layer attends: scores are multiplied by `scale` (1 / sqrt(head_dim) unless the family
// says otherwise), and a row at position p sees positions max(0, p - window + 1) .. p, or every
// position 0 .. p when window is 0 (a sliding window of `window` keys, as transformers has it).
struct AttentionParams {
  float scale = 1.0f;
  size_t window = 0;

  // The scale 1 / sqrt(d) rounded to f32: transformers' default with d = head_dim.
  static float inverse_sqrt_scale(double d);
  // The first position a row at `position` attends to.
  size_t first_key(size_t position) const { return window != 0 && position >= window ? position + 1 - window : 0; }
};

// Causal attention with GQA over the paged cache. q and out are rows x (heads * head_dim);
// query head h reads kv head h / (heads / kv_heads). Rows may belong to different sequences.
void attention(const float* q, std::span<const AttentionRow> rows, const KVLayerView& cache, size_t heads,
               const AttentionParams& params, float* out, int threads);

}  // namespace ditto::ref

namespace ditto::ref {

// RoPE's inverse frequencies as transformers computes them in f32:
// inv_freq[i] = 1 / theta^(2i / head_dim) for i < head_dim / 2 (the power by math.h in double).
void rope_inverse_frequencies(double theta, size_t head_dim, float* inv_freq);

// Llama 3.1's "llama3" scaling of `count` inverse frequencies, in transformers' f32 operations
// (docs/numerics.md): wavelengths 2π / f beyond original / low_freq_factor divide f by
// `factor`, those below original / high_freq_factor keep it, the band between interpolates.
void llama3_scale_frequencies(float* inv_freq, size_t count, double factor, double low_freq_factor,
                              double high_freq_factor, double original_max_positions);

// The RoPE angles of one position: angle = position * inv_freq[i] (f32), then cos and sin
// (evaluated in double by math.h and rounded once to f32), `count` of each.
void rope_angles(const float* inv_freq, size_t count, size_t position, float* cos, float* sin);

}  // namespace ditto::ref

namespace ditto::ref {

// Kernels over one row of logits, for the sampler (docs/sampling.md). Each result is exact
// (a maximum, an index, a set, an integer sum), so it does not depend on the order of work.

// The row is seen in blocks of kLogitsBlock consecutive ids; the sampler keeps each block's
// maximum to skip blocks that cannot matter.
inline constexpr size_t kLogitsBlock = 256;

// Writes the maximum of each block of x[0 .. n-1] (n >= 1) to maxima (ceil(n / kLogitsBlock)
// entries) and returns the largest value, or NaN if any value is NaN or infinite.
float block_max(const float* x, size_t n, float* maxima);

// The smallest i with x[i] == value, or n if there is none.
size_t first_index_of(const float* x, size_t n, float value);

// Writes every i with low <= x[i] < high to ids, in increasing order; returns how many.
// ids must have room for n entries.
size_t indices_in_range(const float* x, size_t n, float low, float high, uint32_t* ids);

// The sampling weight of a logit z <= max: x = (z - max) * inverse_temperature, then
// e = exp_f32(x) in [0, 1] as the integer floor(e * 2^kWeightBits). Sums of weights are sums of
// integers: exact in any order, and below 2^64 for fewer than 2^20 tokens. Every x below
// kNoWeightBelow weighs 0 (exp(-32) < 2^-44).
inline constexpr int kWeightBits = 44;
inline constexpr float kWeightScale = float(uint64_t(1) << kWeightBits);
inline constexpr float kNoWeightBelow = -32.0f;
inline float scaled_logit(float z, float max, float inverse_temperature) { return (z - max) * inverse_temperature; }
uint64_t weight_of(float x);
inline uint64_t sampling_weight(float z, float max, float inverse_temperature) {
  return weight_of(scaled_logit(z, max, inverse_temperature));
}

// The sum of sampling_weight(z[i], max, inverse_temperature) for i < n (every z[i] <= max).
uint64_t sum_of_weights(const float* z, size_t n, float max, float inverse_temperature);

// weights[i] = sampling_weight(z[i], max, inverse_temperature) for i < n (every z[i] <= max).
void sampling_weights(const float* z, size_t n, float max, float inverse_temperature, uint64_t* weights);

}  // namespace ditto::ref
