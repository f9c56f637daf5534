#include "tensor/matrix.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace ditto {

void PackedMatrix::FreeDeleter::operator()(void* p) const { std::free(p); }

namespace {

// Element (n, k) of the row-major source goes to panel n / 16, position k * 16 + n % 16.
template <typename T>
void pack_panels(const T* source, size_t rows, size_t cols, T* out) {
  for (size_t n = 0; n < rows; ++n) {
    T* panel = out + (n / kPanelRows) * cols * kPanelRows + n % kPanelRows;
    const T* row = source + n * cols;
    for (size_t k = 0; k < cols; ++k) panel[k * kPanelRows] = row[k];
  }
}

}  // namespace

PackedMatrix PackedMatrix::pack(DType dtype, size_t rows, size_t cols, const void* source) {
  const size_t element = dtype_size(dtype);
  const size_t panels = (rows + kPanelRows - 1) / kPanelRows;
  const size_t bytes = (panels * kPanelRows * cols * element + 63) / 64 * 64;
  void* storage = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  if (storage == nullptr) throw std::bad_alloc();
  std::memset(storage, 0, bytes);
  // The source may be unaligned (safetensors offsets are not): read it through memcpy'd rows.
  if (element == 4) {
    std::vector<uint32_t> aligned(rows * cols);
    std::memcpy(aligned.data(), source, rows * cols * 4);
    pack_panels(aligned.data(), rows, cols, static_cast<uint32_t*>(storage));
  } else {
    std::vector<uint16_t> aligned(rows * cols);
    std::memcpy(aligned.data(), source, rows * cols * 2);
    pack_panels(aligned.data(), rows, cols, static_cast<uint16_t*>(storage));
  }
  PackedMatrix packed;
  packed.storage_.reset(storage);
  packed.view_ = MatrixView{dtype, rows, cols, storage};
  return packed;
}

}  // namespace ditto
