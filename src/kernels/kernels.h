#pragma once
#include <span>
#include <string>

#include "kernels/ref/kernels.h"

// The kernels the decoder calls: SIMD versions chosen at run time for the best target the
// CPU offers (Highway dynamic dispatch), each bit-identical to its scalar reference in
// kernels/ref/ (docs/numerics.md); tests/simd_test.cpp checks every compiled target.
namespace ditto::kernels {

void matmul(const float* x, size_t rows, const MatrixView& w, float* y, int threads);
// One matrix of matmuls(): its outputs y (x's rows x w.rows).
struct MatmulJob {
  MatrixView w;
  float* y;
};
// matmul() of the same rows x by every job's matrix, the same bits, with one hand-off to the
// threads (and, in the int8 numerics, one rounding of x) for all of them: e.g. q, k and v.
void matmuls(const float* x, size_t rows, std::span<const MatmulJob> jobs, int threads);
// matmuls() of matrices packed for the int8 numerics (ref::matmul_int8).
void matmuls_int8(const float* x, size_t rows, std::span<const MatmulJob> jobs, int threads);
// The int8 numerics' rounding of matmul inputs (ref::quantize_rows), `padding` zero rows after them.
void quantize_rows(const float* x, size_t rows, size_t cols, size_t group, ref::Int8Rows& out, size_t padding = 0,
                   int threads = 1);
void rmsnorm(const float* x, size_t rows, size_t n, const float* weight, float eps, float* out);
void rope(float* x, size_t heads, size_t head_dim, const float* cos, const float* sin);
void rope_angles(const float* inv_freq, size_t count, size_t position, float* cos, float* sin);
// Gated activations, element by element: split over up to `threads` threads when n is large
// (a prefill chunk's rows), the same bits either way.
void silu_mul(const float* gate, const float* up, size_t n, float* out, int threads = 1);
void gelu_tanh_mul(const float* gate, const float* up, size_t n, float* out, int threads = 1);
void softcap(float* x, size_t n, float cap);
// ref::KVLayerView::write, bit for bit: one position's keys and values rounded to the cache's dtype.
void write_kv(const ref::KVLayerView& cache, size_t block, size_t slot, const float* keys, const float* values);
void attention(const float* q, std::span<const ref::AttentionRow> rows, const ref::KVLayerView& cache, size_t heads,
               const ref::AttentionParams& params, float* out, int threads);

// Over one row of logits, for the sampler (ref/kernels.h says what each computes).
float block_max(const float* x, size_t n, float* maxima);
size_t first_index_of(const float* x, size_t n, float value);
size_t indices_in_range(const float* x, size_t n, float low, float high, uint32_t* ids);
uint64_t sum_of_weights(const float* z, size_t n, float max, float inverse_temperature);
void sampling_weights(const float* z, size_t n, float max, float inverse_temperature, uint64_t* weights);

// Not on the hot path: the reference serves.
using ref::add_bias;
using ref::embedding_row;
using ref::llama3_scale_frequencies;
using ref::rope_inverse_frequencies;
using ref::route_top_k;

// The Highway target the kernels run on now (e.g. "AVX3_DL", "AVX3", "AVX2").
std::string target_name();

// If the environment variable DITTO_SIMD_TARGET names a target (e.g. AVX2; any case), the
// kernels run on it from now on rather than on the best one the CPU has: for measuring one
// target's kernels on a machine that has better ones. Read once, by the first call; throws
// ditto::Error, naming the choices, for a target the CPU or the build lacks.
inline constexpr const char* kTargetVariable = "DITTO_SIMD_TARGET";
void pin_target_from_environment();

// GFLOP/s of independent f32 fmas on `threads` threads of the shared pool: the ceiling of
// prefill under the numerics contract (best of 5 runs of ~15 ms each). 0 on targets without
// SIMD fma.
double fma_peak_gflops(int threads);
// GB/s that `threads` threads read streaming through 1 GiB, each its share (best of 3): the
// ceiling of decode. Both are timed in the threads' CPU time, so that other work on the
// machine does not lower them.
double read_bandwidth_gbps(int threads);

}  // namespace ditto::kernels
