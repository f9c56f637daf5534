#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace ditto {

enum class DType { F32, F16, BF16 };

std::string dtype_name(DType dtype);
DType parse_dtype(const std::string& name);  // "f32", "f16", "bf16"; throws ditto::Error
inline size_t dtype_size(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

inline uint32_t f32_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}
inline float f32_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

// bf16 and f16 widen to f32 exactly; narrowing rounds to nearest, ties to even, the way
// torch's .to(torch.bfloat16) / .to(torch.float16) do.
inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float value) {
  uint32_t bits = f32_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float value);

// Reads element i of a row stored in `dtype` and widens it to f32 exactly.
inline float load_as_f32(const void* data, DType dtype, size_t i) {
  switch (dtype) {
    case DType::F32: return static_cast<const float*>(data)[i];
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
  }
  return 0.0f;
}

// Rounds an f32 value to `dtype` and stores it as element i.
inline void store_from_f32(void* data, DType dtype, size_t i, float value) {
  switch (dtype) {
    case DType::F32: static_cast<float*>(data)[i] = value; break;
    case DType::BF16: static_cast<uint16_t*>(data)[i] = f32_to_bf16(value); break;
    case DType::F16: static_cast<uint16_t*>(data)[i] = f32_to_f16(value); break;
  }
}

}  // namespace ditto
