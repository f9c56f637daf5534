#pragma once
#include <cstddef>
#include <cstdint>

#include "ditto/dtype.h"

// ggml's quantised blocks: their fields, and the f32 value of each entry. This is the
// specification of the weights a quantised matmul multiplies with (docs/numerics-quant.md).
namespace ditto {

inline constexpr size_t kQuantBlock = 32;

// The fields of one block of 32 values: scale d and, for Q4_1, minimum m (stored as f16,
// widened exactly), and the quantised entries: -128 .. 127 for Q8_0, 0 .. 15 for Q4_0/Q4_1.
struct QuantBlock {
  float d = 0.0f;
  float m = 0.0f;
  int8_t q[kQuantBlock] = {};  // Q4: entry j is the low nibble of byte j, entry j + 16 its high nibble
};

// Reads one block as ggml stores it: Q8_0 = f16 d, 32 x int8; Q4_0 = f16 d, 16 bytes of
// nibbles; Q4_1 = f16 d, f16 m, 16 bytes of nibbles.
QuantBlock read_block(DType dtype, const void* block);

// The value of entry q of a block, as ggml's and the `gguf` package's dequantize compute it in
// f32: Q8_0 d * q; Q4_0 d * (q - 8); Q4_1 (d * q) + m, the product rounded before the sum.
inline float dequantize(DType dtype, float d, float m, int q) {
  switch (dtype) {
    case DType::Q8_0: return d * float(q);
    case DType::Q4_0: return d * float(q - 8);
    case DType::Q4_1: return d * float(q) + m;
    case DType::F32:
    case DType::F16:
    case DType::BF16: break;  // not block types
  }
  return 0.0f;
}

}  // namespace ditto
