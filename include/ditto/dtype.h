#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace ditto {

// Dense element types, and the block-quantised types of GGUF files (ggml's layouts): a row
// of a quantised matrix is a sequence of blocks of 32 values, each block a scale (and for
// Q4_1 a minimum) in f16 followed by the quantised values. docs/numerics-quant.md.
enum class DType { F32, F16, BF16, Q8_0, Q4_0, Q4_1 };

std::string dtype_name(DType dtype);
DType parse_dtype(const std::string& name);  // "f32", "f16", "bf16"; throws ditto::Error

constexpr bool is_quantized(DType dtype) { return dtype == DType::Q8_0 || dtype == DType::Q4_0 || dtype == DType::Q4_1; }
// Values per block: 32 for the quantised types, 1 for dense ones.
constexpr size_t dtype_block_elements(DType dtype) { return is_quantized(dtype) ? 32 : 1; }
// Bytes per block (per element for dense types).
constexpr size_t dtype_block_bytes(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Q8_0: return 34;  // f16 d, 32 x int8
    case DType::Q4_0: return 18;  // f16 d, 16 bytes of two 4-bit values
    case DType::Q4_1: return 20;  // f16 d, f16 m, 16 bytes of two 4-bit values
  }
  return 0;
}
// Bytes of one element of a dense type (the quantised types have no per-element size).
constexpr size_t dtype_size(DType dtype) { return dtype_block_bytes(dtype); }
// Bytes of `count` values, `count` a multiple of dtype_block_elements(dtype).
constexpr size_t dtype_bytes(DType dtype, size_t count) {
  return count / dtype_block_elements(dtype) * dtype_block_bytes(dtype);
}

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

// Reads element i of a row stored in a dense `dtype` and widens it to f32 exactly (quantised
// entries are read with dequantize(), src/tensor/quant.h).
inline float load_as_f32(const void* data, DType dtype, size_t i) {
  switch (dtype) {
    case DType::F32: return static_cast<const float*>(data)[i];
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1: break;
  }
  return 0.0f;
}

// Rounds an f32 value to a dense `dtype` and stores it as element i.
inline void store_from_f32(void* data, DType dtype, size_t i, float value) {
  switch (dtype) {
    case DType::F32: static_cast<float*>(data)[i] = value; break;
    case DType::BF16: static_cast<uint16_t*>(data)[i] = f32_to_bf16(value); break;
    case DType::F16: static_cast<uint16_t*>(data)[i] = f32_to_f16(value); break;
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1: break;
  }
}

}  // namespace ditto
