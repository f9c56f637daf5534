#pragma once
#include <string>

namespace ditto {

// How a model's quantised matrices multiply their inputs (docs/numerics-quant.md). Either way
// the logits are bitwise the same whatever the chunking, threads, batch or SIMD target.
//  - Exact: every weight dequantised exactly to f32, then the f32 fma chain of dense weights:
//    transformers' function on the GGUF file.
//  - Int8: each row of inputs rounded to int8 per block of 32 with an f32 scale, integer dot
//    products per block, scaled and summed over the blocks in order in f32: llama.cpp's kind
//    of arithmetic, with one order of its own.
// Dense matrices (f32, f16, bf16) are exact in both modes.
enum class Numerics { Exact, Int8 };

// What a model with quantised matrices runs with unless told otherwise (LoadOptions): chosen by
// measurement, README "Quantised models".
inline constexpr Numerics kQuantizedDefault = Numerics::Int8;

std::string numerics_name(Numerics numerics);          // "exact", "int8"
Numerics parse_numerics(const std::string& name);      // throws ditto::Error naming the choices

}  // namespace ditto
