// The int8 numerics (docs/numerics-quant.md): inputs rounded to int8 per block of 32, integer
// dot products with the entries of a quantised matrix, scaled and summed over the groups in f32.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ref/kernels.h"
#include "kernels/thread_pool.h"

namespace ditto::ref {

void Int8Rows::resize(size_t row_count, size_t col_count, size_t group_size, size_t padding) {
  rows = row_count, cols = col_count, group = group_size;
  const size_t all = rows + padding;
  values.resize(all * cols);
  scales.resize(all * blocks());
  sums.resize(all * groups());
  scaled_sums.resize(all * groups());
  std::fill(values.begin() + ptrdiff_t(rows * cols), values.end(), int8_t(0));
  std::fill(scales.begin() + ptrdiff_t(rows * blocks()), scales.end(), 0.0f);
  std::fill(sums.begin() + ptrdiff_t(rows * groups()), sums.end(), 0);
  std::fill(scaled_sums.begin() + ptrdiff_t(rows * groups()), scaled_sums.end(), 0.0f);
}

float quantize_block(const float* x, int8_t* q) {
  // The bits of |x| order as the values do, and every NaN's above the infinity's: the largest
  // is exact whatever the order of the comparisons.
  uint32_t largest = 0;
  for (size_t i = 0; i < kInt8Block; ++i) largest = std::max(largest, f32_bits(x[i]) & 0x7fffffffu);
  const bool finite = largest < 0x7f800000u;
  const float scale = finite ? f32_from_bits(largest) / 127.0f : std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 0; i < kInt8Block; ++i)
    q[i] = finite && scale != 0.0f ? int8_t(std::nearbyint(std::clamp(x[i] / scale, -127.0f, 127.0f))) : int8_t(0);
  return scale;
}

void quantize_rows(const float* x, size_t rows, size_t cols, size_t group, Int8Rows& out) {
  out.resize(rows, cols, group);
  for (size_t m = 0; m < rows; ++m)
    for (size_t b = 0; b < out.blocks(); ++b) {
      const size_t at = m * cols + b * kInt8Block;
      out.scales[m * out.blocks() + b] = quantize_block(x + at, out.values.data() + at);
    }
  for (size_t m = 0; m < rows; ++m)
    for (size_t g = 0; g < out.groups(); ++g) {
      int32_t sum = 0;
      for (size_t i = 0; i < group; ++i) sum += out.values[m * cols + g * group + i];
      out.sums[m * out.groups() + g] = sum;
      out.scaled_sums[m * out.groups() + g] = float(sum) * out.scales[m * out.blocks() + g * group / kInt8Block];
    }
}

void matmul_int8(const float* x, size_t rows, const MatrixView& w, float* y, int threads) {
  Int8Rows in;
  const size_t group = quant_group_size(w.dtype);
  quantize_rows(x, rows, w.cols, group, in);
  const bool has_minimum = quant_minimum(w.dtype) != QuantMinimum::None;
  parallel_for(threads, w.rows, [&](size_t n_begin, size_t n_end) {
    std::vector<float> acc(rows);
    int entries[kMaxQuantGroup];
    for (size_t n = n_begin; n < n_end; ++n) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      // Output n of every row, the groups in increasing order (each row's chain is its own).
      for (size_t g = 0; g < in.groups(); ++g) {
        for (size_t i = 0; i < group; ++i) entries[i] = w.entry(n, g * group + i);
        const float scale = w.group_scale(n, g), minimum_term = w.int8_minimum_term(n, g);
        for (size_t m = 0; m < rows; ++m) {
          const int8_t* q = in.values.data() + m * w.cols + g * group;
          int32_t product = 0;
          for (size_t i = 0; i < group; ++i) product += int32_t(q[i]) * entries[i];
          const float block_scale = in.scales[m * in.blocks() + g * group / kInt8Block];
          acc[m] = std::fma(float(product), scale * block_scale, acc[m]);
          const float scaled_sum = in.scaled_sums[m * in.groups() + g];
          if (has_minimum) acc[m] = std::fma(minimum_term, scaled_sum, acc[m]);  // +-minimum
        }
      }
      for (size_t m = 0; m < rows; ++m) y[m * w.rows + n] = acc[m];
    }
  });
}

}  // namespace ditto::ref
