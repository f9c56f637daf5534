#pragma once
#include <cstddef>
#include <cstdint>

#include "ditto/dtype.h"

// ggml's quantised blocks: their fields, and the f32 value of each entry. This is the
// specification of the weights a quantised matmul multiplies with (docs/numerics-quant.md).
namespace ditto {

// A block is cut into groups of inputs that share one f32 scale (and minimum): the 32-value
// blocks are one group each; the K-quants' sub-blocks are groups of 32 (Q4_K, Q5_K) or 16
// (Q2_K, Q3_K, Q6_K).
constexpr size_t quant_group_size(DType dtype) {
  return dtype == DType::Q2_K || dtype == DType::Q3_K || dtype == DType::Q6_K ? 16 : 32;
}
inline constexpr size_t kMaxQuantGroup = 32;
// The largest block (the K-quants' super-block) and the most groups a block has.
inline constexpr size_t kMaxQuantBlock = 256;
inline constexpr size_t kMaxQuantGroups = kMaxQuantBlock / 16;

// How a type's minimum enters the value: not at all, added to the product (Q4_1, Q5_1), or
// subtracted from it (the K-quants with minimums), each as the `gguf` package writes it.
enum class QuantMinimum { None, Added, Subtracted };
constexpr QuantMinimum quant_minimum(DType dtype) {
  switch (dtype) {
    case DType::Q4_1:
    case DType::Q5_1: return QuantMinimum::Added;
    case DType::Q2_K:
    case DType::Q4_K:
    case DType::Q5_K: return QuantMinimum::Subtracted;
    default: return QuantMinimum::None;
  }
}

// One group as the `gguf` package computes its parts in f32: the scale and minimum (f16 fields
// widened exactly; for the K-quants the f32 product of the super-block's f16 factor and the
// sub-block's integer factor, e.g. Q4_K: d * float(sc), dmin * float(m)), and the entries as the
// signed integers that multiply the scale (Q4_0: q - 8, Q5_0: q - 16, Q6_K: q - 32, Q3_K: q - 4
// where the high bit is clear; Q8_0, Q4_1, Q5_1, Q2_K, Q4_K, Q5_K: q).
struct QuantGroup {
  float scale = 0.0f;
  float minimum = 0.0f;
  int8_t entries[kMaxQuantGroup] = {};  // the first quant_group_size(dtype) are used
};

// Reads one block (dtype_block_elements(dtype) values) as ggml stores it into its
// dtype_block_elements(dtype) / quant_group_size(dtype) groups, in the order of the values.
void read_block(DType dtype, const void* block, QuantGroup* groups);

// The value of an entry of a group: scale * float(entry), rounded, then for types with a
// minimum `+ minimum` or `- minimum`, rounded: the operations and their order of the `gguf`
// package's dequantize (and of ggml's scalar dequantize_row_*).
inline float dequantize(DType dtype, float scale, float minimum, int entry) {
  const float product = scale * float(entry);
  switch (quant_minimum(dtype)) {
    case QuantMinimum::Added: return product + minimum;
    case QuantMinimum::Subtracted: return product - minimum;
    case QuantMinimum::None: break;
  }
  return product;
}

}  // namespace ditto
