#include "ditto/dtype.h"

#include "ditto/error.h"

namespace ditto {

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::Q8_0: return "q8_0";
    case DType::Q4_0: return "q4_0";
    case DType::Q4_1: return "q4_1";
    case DType::Q5_0: return "q5_0";
    case DType::Q5_1: return "q5_1";
    case DType::Q2_K: return "q2_k";
    case DType::Q3_K: return "q3_k";
    case DType::Q4_K: return "q4_k";
    case DType::Q5_K: return "q5_k";
    case DType::Q6_K: return "q6_k";
  }
  return "?";
}

DType parse_dtype(const std::string& name) {
  if (name == "f32" || name == "F32" || name == "float32") return DType::F32;
  if (name == "f16" || name == "F16" || name == "float16") return DType::F16;
  if (name == "bf16" || name == "BF16" || name == "bfloat16") return DType::BF16;
  throw Error("unknown dtype '" + name + "' (expected f32, f16 or bf16)");
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return f32_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return f32_from_bits(sign);
  // Subnormal f16: normalise into an f32 exponent.
  int e = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return f32_from_bits(sign | (uint32_t(e) << 23) | ((mantissa & 0x3ffu) << 13));
}

uint16_t f32_to_f16(float value) {
  const uint32_t bits = f32_bits(value);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to infinity
  if (abs >= 0x38800000u) {  // normal f16
    uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
    return uint16_t(sign | ((rounded - 0x38000000u) >> 13));
  }
  if (abs < 0x33000000u) return sign;  // below half the smallest subnormal: zero
  // Subnormal f16: shift the full mantissa, rounding to nearest even.
  const uint32_t exponent = abs >> 23;
  const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exponent;  // 14..24
  uint32_t result = mantissa >> shift;
  const uint32_t remainder = mantissa & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (remainder > half || (remainder == half && (result & 1u))) ++result;
  return uint16_t(sign | result);
}

}  // namespace ditto
