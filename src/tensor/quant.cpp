#include "tensor/quant.h"

#include <cstring>

namespace ditto {

namespace {

float f16_at(const unsigned char* bytes) {
  uint16_t h;
  std::memcpy(&h, bytes, 2);
  return f16_to_f32(h);
}

}  // namespace

QuantBlock read_block(DType dtype, const void* block) {
  const auto* b = static_cast<const unsigned char*>(block);
  QuantBlock out;
  out.d = f16_at(b);
  if (dtype == DType::Q8_0) {
    for (size_t j = 0; j < kQuantBlock; ++j) out.q[j] = int8_t(b[2 + j]);
    return out;
  }
  const unsigned char* nibbles = b + 2;
  if (dtype == DType::Q4_1) {
    out.m = f16_at(b + 2);
    nibbles = b + 4;
  }
  for (size_t j = 0; j < kQuantBlock / 2; ++j) {
    out.q[j] = int8_t(nibbles[j] & 0x0f);
    out.q[j + kQuantBlock / 2] = int8_t(nibbles[j] >> 4);
  }
  return out;
}

}  // namespace ditto
