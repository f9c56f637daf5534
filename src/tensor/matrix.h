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
// A quantised matrix is packed in the same panels, as one QuantTile per block of 32 inputs:
// panel p holds tiles for inputs 0..31, 32..63, ... of its 16 outputs.
inline constexpr size_t kPanelRows = 16;

// 16 outputs x 32 inputs of a quantised matrix: each output's block with its scale and minimum
// widened to f32 and its entries one per byte, input-major, so that a vector load reads one
// input of all 16 outputs. Entry (n, k) is dequantize(dtype, d[n%16], m[n%16], q[k%32][n%16]).
struct QuantTile {
  float d[kPanelRows];
  float m[kPanelRows];
  int8_t q[kQuantBlock][kPanelRows];
};
static_assert(sizeof(QuantTile) % 64 == 0, "tiles keep 64-byte alignment");

struct MatrixView {
  DType dtype = DType::F32;
  size_t rows = 0;
  size_t cols = 0;
  const void* data = nullptr;  // 64-byte aligned

  size_t panels() const { return (rows + kPanelRows - 1) / kPanelRows; }
  size_t panel_bytes() const {
    return is_quantized(dtype) ? cols / kQuantBlock * sizeof(QuantTile) : cols * kPanelRows * dtype_size(dtype);
  }
  const void* panel(size_t p) const { return static_cast<const unsigned char*>(data) + p * panel_bytes(); }
  // The tile of a quantised matrix for panel p and inputs 32b .. 32b+31.
  const QuantTile& tile(size_t p, size_t b) const { return static_cast<const QuantTile*>(panel(p))[b]; }
  float at(size_t n, size_t k) const {
    if (is_quantized(dtype)) {
      const QuantTile& t = tile(n / kPanelRows, k / kQuantBlock);
      const size_t j = n % kPanelRows;
      return dequantize(dtype, t.d[j], t.m[j], t.q[k % kQuantBlock][j]);
    }
    return load_as_f32(panel(n / kPanelRows), dtype, k * kPanelRows + n % kPanelRows);
  }
};

// Owns a matrix packed once, at load, from the file's bytes into the kernels' layout.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // `source` holds rows x cols elements of `dtype`, row-major, at any alignment (for a
  // quantised dtype, cols is a multiple of 32). Packed output n is source row source_rows[n],
  // or source row n when source_rows is empty.
  static PackedMatrix pack(DType dtype, size_t rows, size_t cols, const void* source,
                           std::span<const size_t> source_rows = {});
  const MatrixView& view() const { return view_; }

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, FreeDeleter> storage_;
  MatrixView view_;
};

}  // namespace ditto
