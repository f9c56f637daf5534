#pragma once
#include <string>

#include "kernels/ref/kernels.h"

// The kernels the decoder calls: SIMD versions chosen at run time for the best target the
// CPU offers (Highway dynamic dispatch), each bit-identical to its scalar reference in
// kernels/ref/ (docs/numerics.md); tests/simd_test.cpp checks every compiled target.
namespace ditto::kernels {

void matmul(const float* x, size_t rows, const MatrixView& w, float* y, int threads);
void rmsnorm(const float* x, size_t rows, size_t n, const float* weight, float eps, float* out);
void rope(float* x, size_t heads, size_t head_dim, const float* cos, const float* sin);
void silu_mul(const float* gate, const float* up, size_t n, float* out);
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
using ref::rope_angles;
using ref::rope_inverse_frequencies;
using ref::route_top_k;

// The Highway target the kernels run on now (e.g. "AVX3", "AVX2").
std::string target_name();

// GFLOP/s of independent f32 fmas on `threads` threads of the shared pool: the ceiling of
// prefill under the numerics contract (best of 5 runs of ~15 ms each). 0 on targets without
// SIMD fma.
double fma_peak_gflops(int threads);

}  // namespace ditto::kernels
