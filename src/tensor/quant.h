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
// The int8 numerics round inputs to int8 in blocks of this many.
inline constexpr size_t kInt8Block = 32;

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
  // The K-quants' factors of those: the super-block's f16 d and dmin, widened, and the group's
  // integers, scale = d * float(scale_factor), minimum = dmin * float(minimum_factor).
  float d = 0.0f, dmin = 0.0f;
  int scale_factor = 0, minimum_factor = 0;
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

// How an int8 tile stores a scale or a minimum (src/tensor/matrix.h): the file's f16 field as it
// is (the 32-input types); the K-quants' factors, d (f16) per output and the integer (a byte) per
// output and group, whose f32 product is the value exactly; or f32.
enum class Int8Field { F16, Factored, F32 };

// The int8 numerics (docs/numerics-quant.md) multiply a type's entries with int8 inputs in
// blocks of 32 inputs; the 16-input groups of Q2_K, Q3_K and Q6_K are two per block. How the
// packed tiles store a type's entries for that (src/tensor/matrix.h):
struct Int8Packing {
  size_t groups;        // weight groups per block of 32 inputs: 1, or 2 for 16-input groups
  bool minimum;         // the type has a minimum: the tiles hold it
  bool signed_entries;  // Q8_0: entries stored as they are (-128 .. 127); the others store
  int offset;           //   entry + offset, unsigned,
  int largest;          //   at most `largest`
  Int8Field scale_field, minimum_field;  // the minimum's only for types with one

  // Unsigned entries below 64 store their low 4 bits two to a byte, and the bits above those
  // (1 for the 5-bit types, 2 for Q6_K) in planes.
  constexpr bool nibbles() const { return !signed_entries && largest < 64; }
  constexpr size_t high_bits() const { return !nibbles() || largest < 16 ? 0 : largest < 32 ? 1 : 2; }
};
constexpr Int8Packing int8_packing(DType dtype) {
  const size_t groups = kInt8Block / quant_group_size(dtype);
  const bool minimum = quant_minimum(dtype) != QuantMinimum::None;
  constexpr Int8Field F16 = Int8Field::F16, Factored = Int8Field::Factored;
  switch (dtype) {
    case DType::Q8_0: return {groups, minimum, true, 0, 128, F16, F16};
    case DType::Q4_0: return {groups, minimum, false, 8, 15, F16, F16};
    case DType::Q4_1: return {groups, minimum, false, 0, 15, F16, F16};
    case DType::Q5_0: return {groups, minimum, false, 16, 31, F16, F16};
    case DType::Q5_1: return {groups, minimum, false, 0, 31, F16, F16};
    // The nibbles-only K-quants keep f32 products: their row tiles read the packed tiles, and
    // multiplying the factors there cost more than it saved (matmul_int8.cpp).
    case DType::Q2_K: return {groups, minimum, false, 0, 3, Int8Field::F32, Int8Field::F32};
    case DType::Q3_K: return {groups, minimum, false, 4, 7, Int8Field::F32, Int8Field::F32};
    case DType::Q4_K: return {groups, minimum, false, 0, 15, Int8Field::F32, Int8Field::F32};
    case DType::Q5_K: return {groups, minimum, false, 0, 31, Factored, Factored};
    case DType::Q6_K: return {groups, minimum, false, 32, 63, Factored, Factored};
    default: return {groups, minimum, false, 0, 0, Int8Field::F32, Int8Field::F32};  // not quantised
  }
}

}  // namespace ditto
