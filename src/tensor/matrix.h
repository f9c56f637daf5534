#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ditto/dtype.h"

namespace ditto {

// A weight matrix as the kernels read it: `rows` output features, each a contiguous row of
// `cols` input features in `dtype`. Rows are 64-byte aligned (row_stride is in elements).
struct MatrixView {
  DType dtype = DType::F32;
  size_t rows = 0;
  size_t cols = 0;
  size_t row_stride = 0;
  const void* data = nullptr;

  const void* row(size_t r) const {
    return static_cast<const unsigned char*>(data) + r * row_stride * dtype_size(dtype);
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
