#include "tensor/matrix.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace ditto {

void PackedMatrix::FreeDeleter::operator()(void* p) const { std::free(p); }

PackedMatrix PackedMatrix::pack(DType dtype, size_t rows, size_t cols, const void* source) {
  const size_t element = dtype_size(dtype);
  const size_t panels = (rows + kPanelRows - 1) / kPanelRows;
  const size_t bytes = (panels * kPanelRows * cols * element + 63) / 64 * 64;
  void* storage = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  if (storage == nullptr) throw std::bad_alloc();
  std::memset(storage, 0, bytes);
  auto* out = static_cast<unsigned char*>(storage);
  const auto* in = static_cast<const unsigned char*>(source);
  for (size_t n = 0; n < rows; ++n) {
    unsigned char* panel = out + (n / kPanelRows) * cols * kPanelRows * element;
    for (size_t k = 0; k < cols; ++k)
      std::memcpy(panel + (k * kPanelRows + n % kPanelRows) * element, in + (n * cols + k) * element, element);
  }
  PackedMatrix packed;
  packed.storage_.reset(storage);
  packed.view_ = MatrixView{dtype, rows, cols, storage};
  return packed;
}

}  // namespace ditto
