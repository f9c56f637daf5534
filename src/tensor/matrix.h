#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "ditto/dtype.h"
#include "tensor/quant.h"

namespace ditto {

// A weight matrix as the kernels read it: `rows` output features by `cols` input features,
// packed in panels of kPanelRows outputs. Panel p holds outputs 16p .. 16p+15 for every
// input k, k-major: element (n, k) lies at panel n / 16, position k * 16 + n % 16. A matmul
// then broadcasts one activation and multiplies a whole panel row with it, so each output
// stays one sequential chain over k (docs/numerics.md). The last panel is zero-padded.
// A quantised matrix is packed in the same panels, as one QuantTile per group of inputs that
// share a scale (quant_group_size: 32, or 16): panel p holds the tiles of inputs 0..G-1,
// G..2G-1, ... of its 16 outputs.
inline constexpr size_t kPanelRows = 16;

// G inputs x 16 outputs of a quantised matrix: each output's group with its f32 scale and
// minimum (QuantGroup) and its entries one per byte, input-major, so that a vector load reads one
// input of all 16 outputs. Entry (n, k) is
// dequantize(dtype, scale[n%16], minimum[n%16], entries[k%G][n%16]).
template <size_t G>
struct QuantTile {
  float scale[kPanelRows];
  float minimum[kPanelRows];
  int8_t entries[G][kPanelRows];
};
static_assert(sizeof(QuantTile<32>) % 64 == 0 && sizeof(QuantTile<16>) % 64 == 0, "tiles keep 64-byte alignment");

struct MatrixView {
  DType dtype = DType::F32;
  size_t rows = 0;
  size_t cols = 0;
  const void* data = nullptr;  // 64-byte aligned

  size_t panels() const { return (rows + kPanelRows - 1) / kPanelRows; }
  size_t panel_bytes() const {
    if (!is_quantized(dtype)) return cols * kPanelRows * dtype_size(dtype);
    const size_t group = quant_group_size(dtype);
    return cols / group * (group == 16 ? sizeof(QuantTile<16>) : sizeof(QuantTile<32>));
  }
  const void* panel(size_t p) const { return static_cast<const unsigned char*>(data) + p * panel_bytes(); }
  // The tile of a quantised matrix (G = quant_group_size(dtype)) for panel p and inputs
  // G*b .. G*b+G-1.
  template <size_t G>
  const QuantTile<G>& tile(size_t p, size_t b) const {
    return static_cast<const QuantTile<G>*>(panel(p))[b];
  }
  float at(size_t n, size_t k) const {
    if (is_quantized(dtype)) return quant_group_size(dtype) == 16 ? quantized_at<16>(n, k) : quantized_at<32>(n, k);
    return load_as_f32(panel(n / kPanelRows), dtype, k * kPanelRows + n % kPanelRows);
  }

 private:
  template <size_t G>
  float quantized_at(size_t n, size_t k) const {
    const QuantTile<G>& t = tile<G>(n / kPanelRows, k / G);
    const size_t j = n % kPanelRows;
    return dequantize(dtype, t.scale[j], t.minimum[j], t.entries[k % G][j]);
  }
};

// Owns a matrix packed once, at load, from the file's bytes into the kernels' layout.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // `source` holds rows x cols elements of `dtype`, row-major, at any alignment (for a
  // quantised dtype, cols is a multiple of its block, dtype_block_elements). Packed output n is
  // source row source_rows[n], or source row n when source_rows is empty.
  static PackedMatrix pack(DType dtype, size_t rows, size_t cols, const void* source,
                           std::span<const size_t> source_rows = {});
  // The memory pack() takes for such a matrix; throws ditto::Error if the size overflows.
  static size_t packed_bytes(DType dtype, size_t rows, size_t cols);
  const MatrixView& view() const { return view_; }

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, FreeDeleter> storage_;
  MatrixView view_;
};

}  // namespace ditto
