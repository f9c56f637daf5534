#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ditto/dtype.h"

namespace ditto {

// A weight matrix as the kernels read it: `rows` output features by `cols` input features,
// packed in panels of kPanelRows outputs. Panel p holds outputs 16p .. 16p+15 for every
// input k, k-major: element (n, k) lies at panel n / 16, position k * 16 + n % 16. A matmul
// then broadcasts one activation and multiplies a whole panel row with it, so each output
// stays one sequential chain over k (docs/numerics.md). The last panel is zero-padded.
inline constexpr size_t kPanelRows = 16;

struct MatrixView {
  DType dtype = DType::F32;
  size_t rows = 0;
  size_t cols = 0;
  const void* data = nullptr;  // 64-byte aligned

  size_t panels() const { return (rows + kPanelRows - 1) / kPanelRows; }
  const void* panel(size_t p) const {
    return static_cast<const unsigned char*>(data) + p * cols * kPanelRows * dtype_size(dtype);
  }
  float at(size_t n, size_t k) const {
    return load_as_f32(panel(n / kPanelRows), dtype, k * kPanelRows + n % kPanelRows);
  }
};

// Owns a matrix packed once, at load, from the file's bytes into the kernels' layout.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // `source` holds rows x cols elements of `dtype`, row-major, at any alignment.
  static PackedMatrix pack(DType dtype, size_t rows, size_t cols, const void* source);
  const MatrixView& view() const { return view_; }

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, FreeDeleter> storage_;
  MatrixView view_;
};

}  // namespace ditto
