#include "tensor/matrix.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace ditto {

void PackedMatrix::FreeDeleter::operator()(void* p) const { std::free(p); }

PackedMatrix PackedMatrix::pack(DType dtype, size_t rows, size_t cols, const void* source) {
  const size_t element = dtype_size(dtype);
  const size_t per_line = 64 / element;
  const size_t stride = (cols + per_line - 1) / per_line * per_line;
  const size_t bytes = rows * stride * element;
  void* storage = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  if (storage == nullptr) throw std::bad_alloc();
  std::memset(storage, 0, bytes);
  for (size_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<unsigned char*>(storage) + r * stride * element,
                static_cast<const unsigned char*>(source) + r * cols * element, cols * element);
  PackedMatrix packed;
  packed.storage_.reset(storage);
  packed.view_ = MatrixView{dtype, rows, cols, stride, storage};
  return packed;
}

}  // namespace ditto
