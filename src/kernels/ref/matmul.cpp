#include <cmath>

#include "kernels/ref/kernels.h"

namespace ditto::ref {

void matmul(const float* x, size_t rows, const MatrixView& w, float* y, int threads) {
  const size_t k_len = w.cols;
  const size_t n_len = w.rows;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (size_t n = 0; n < n_len; ++n) {
    const void* weights = w.row(n);
    for (size_t m = 0; m < rows; ++m) {
      const float* xm = x + m * k_len;
      float acc = 0.0f;
      for (size_t k = 0; k < k_len; ++k) acc = std::fma(xm[k], load_as_f32(weights, w.dtype, k), acc);
      y[m * n_len + n] = acc;
    }
  }
}

void embedding_row(const MatrixView& table, size_t token, float* out) {
  const void* row = table.row(token);
  for (size_t k = 0; k < table.cols; ++k) out[k] = load_as_f32(row, table.dtype, k);
}

}  // namespace ditto::ref
