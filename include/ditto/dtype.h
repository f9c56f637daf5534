#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace ditto {

// Dense element types, and the block-quantised types of GGUF files (ggml's layouts): a row
// of a quantised matrix is a sequence of blocks of 32 values (Q8_0 .. Q5_1) or super-blocks of
// 256 (the K-quants Q2_K .. Q6_K), each holding f16 scales (and minimums), sub-block scales
// for the K-quants, and the quantised values. docs/numerics-quant.md.
enum class DType { F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K };

inline constexpr DType kQuantizedDTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                                             DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

std::string dtype_name(DType dtype);         // "f32", ..., "q4_k"
DType parse_dtype(const std::string& name);  // "f32", "f16", "bf16"; throws ditto::Error

constexpr bool is_quantized(DType dtype) {
  return dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16;
}
// Values per block: 32 for Q8_0 .. Q5_1, 256 for the K-quants, 1 for dense types.
constexpr size_t dtype_block_elements(DType dtype) {
  switch (dtype) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return 1;
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1: return 32;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return 256;
  }
  return 1;
}
// Bytes per block (per element for dense types).
constexpr size_t dtype_block_bytes(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Q8_0: return 34;   // f16 d, 32 x int8
    case DType::Q4_0: return 18;   // f16 d, 16 bytes of two 4-bit values
    case DType::Q4_1: return 20;   // f16 d, f16 m, 16 bytes of two 4-bit values
    case DType::Q5_0: return 22;   // f16 d, 4 bytes of fifth bits, 16 bytes of 4-bit values
    case DType::Q5_1: return 24;   // f16 d, f16 m, 4 bytes of fifth bits, 16 bytes of 4-bit values
    case DType::Q2_K: return 84;   // 16 bytes of 4-bit scales and minimums, 64 bytes of 2-bit values, f16 d, f16 dmin
    case DType::Q3_K: return 110;  // 32 bytes of third bits, 64 bytes of 2-bit values, 12 bytes of 6-bit scales, f16 d
    case DType::Q4_K: return 144;  // f16 d, f16 dmin, 12 bytes of 6-bit scales and minimums, 128 bytes of 4-bit values
    case DType::Q5_K: return 176;  // as Q4_K, then 32 bytes of fifth bits before the 4-bit values
    case DType::Q6_K: return 210;  // 128 bytes of low 4 bits, 64 bytes of high 2 bits, 16 x int8 scales, f16 d
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
    default: break;  // quantised types
  }
  return 0.0f;
}

// Rounds an f32 value to a dense `dtype` and stores it as element i.
inline void store_from_f32(void* data, DType dtype, size_t i, float value) {
  switch (dtype) {
    case DType::F32: static_cast<float*>(data)[i] = value; break;
    case DType::BF16: static_cast<uint16_t*>(data)[i] = f32_to_bf16(value); break;
    case DType::F16: static_cast<uint16_t*>(data)[i] = f32_to_f16(value); break;
    default: break;  // quantised types
  }
}

}  // namespace ditto
