#include "tensor/quant.h"

#include <cstring>

namespace ditto {

namespace {

float f16_at(const unsigned char* bytes) {
  uint16_t h;
  std::memcpy(&h, bytes, 2);
  return f16_to_f32(h);
}

uint32_t u32_at(const unsigned char* bytes) {
  uint32_t v;
  std::memcpy(&v, bytes, 4);
  return v;
}

// The 32 nibbles of a 32-value block: byte i holds value i (low nibble) and value i + 16 (high).
int nibble(const unsigned char* nibbles, size_t j) { return j < 16 ? nibbles[j] & 0x0f : nibbles[j - 16] >> 4; }

// Q4_K and Q5_K: the 6-bit scale and minimum of sub-block i from the 12 packed bytes. Bytes 0-3
// hold the scales of sub-blocks 0-3 in their low 6 bits, bytes 4-7 their minimums; bytes 8-11
// hold the low 4 bits of sub-blocks 4-7 (scale low nibble, minimum high nibble), whose top 2
// bits are the top 2 bits of bytes 0-3 (scales) and 4-7 (minimums).
void scale_and_min_k4(const unsigned char* s, size_t i, int& scale, int& minimum) {
  if (i < 4) {
    scale = s[i] & 63;
    minimum = s[i + 4] & 63;
  } else {
    scale = (s[i + 4] & 0x0f) | ((s[i - 4] >> 6) << 4);
    minimum = (s[i + 4] >> 4) | ((s[i] >> 6) << 4);
  }
}

// Q3_K: the 6-bit scale of sub-block i (0..15), minus 32. Bytes 0-7 hold the low 4 bits
// (sub-blocks 0-7 in the low nibbles, 8-15 in the high ones), bytes 8-11 the top 2 bits
// (sub-block i in byte 8 + i % 4 at bit 2 * (i / 4)).
int scale_k3(const unsigned char* s, size_t i) {
  const int low = i < 8 ? s[i] & 0x0f : s[i - 8] >> 4;
  const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// A K-quant group's factors, and its scale and minimum as their f32 products.
void set_factors(QuantGroup& group, float d, int scale_factor, float dmin = 0.0f, int minimum_factor = 0) {
  group.d = d;
  group.dmin = dmin;
  group.scale_factor = scale_factor;
  group.minimum_factor = minimum_factor;
  group.scale = d * float(scale_factor);
  group.minimum = dmin * float(minimum_factor);
}

}  // namespace

void read_block(DType dtype, const void* block, QuantGroup* groups) {
  const auto* b = static_cast<const unsigned char*>(block);
  switch (dtype) {
    case DType::Q8_0:
      groups[0].scale = f16_at(b);
      for (size_t j = 0; j < 32; ++j) groups[0].entries[j] = int8_t(b[2 + j]);
      return;
    case DType::Q4_0:
      groups[0].scale = f16_at(b);
      for (size_t j = 0; j < 32; ++j) groups[0].entries[j] = int8_t(nibble(b + 2, j) - 8);
      return;
    case DType::Q4_1:
      groups[0].scale = f16_at(b);
      groups[0].minimum = f16_at(b + 2);
      for (size_t j = 0; j < 32; ++j) groups[0].entries[j] = int8_t(nibble(b + 4, j));
      return;
    case DType::Q5_0:
    case DType::Q5_1: {
      // f16 d, (Q5_1: f16 m), 32 fifth bits (bit j of a little-endian u32 for value j), nibbles.
      const bool with_minimum = dtype == DType::Q5_1;
      const unsigned char* fields = b + (with_minimum ? 4 : 2);
      const uint32_t high = u32_at(fields);
      groups[0].scale = f16_at(b);
      if (with_minimum) groups[0].minimum = f16_at(b + 2);
      for (size_t j = 0; j < 32; ++j) {
        const int q = nibble(fields + 4, j) | int((high >> j) & 1) << 4;
        groups[0].entries[j] = int8_t(with_minimum ? q : q - 16);
      }
      return;
    }
    case DType::Q2_K: {
      // 16 bytes of (minimum << 4 | scale), 64 bytes of 2-bit values, f16 d, f16 dmin. Value
      // v = 128 h + 32 s + l is bits 2s, 2s+1 of byte 32 h + l.
      const unsigned char* values = b + 16;
      const float d = f16_at(b + 80), dmin = f16_at(b + 82);
      for (size_t i = 0; i < 16; ++i) set_factors(groups[i], d, b[i] & 0x0f, dmin, b[i] >> 4);
      for (size_t v = 0; v < 256; ++v)
        groups[v / 16].entries[v % 16] = int8_t((values[v / 128 * 32 + v % 32] >> (2 * (v % 128 / 32))) & 3);
      return;
    }
    case DType::Q3_K: {
      // 32 bytes of high bits (value v: bit v / 32 of byte v % 32), 64 bytes of 2-bit values as
      // in Q2_K, 12 bytes of 6-bit scales, f16 d. A clear high bit subtracts 4.
      const unsigned char* high = b;
      const unsigned char* values = b + 32;
      const float d = f16_at(b + 108);
      for (size_t i = 0; i < 16; ++i) set_factors(groups[i], d, scale_k3(b + 96, i));
      for (size_t v = 0; v < 256; ++v) {
        const int low = (values[v / 128 * 32 + v % 32] >> (2 * (v % 128 / 32))) & 3;
        const bool high_bit = (high[v % 32] >> (v / 32)) & 1;
        groups[v / 16].entries[v % 16] = int8_t(low - (high_bit ? 0 : 4));
      }
      return;
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      // f16 d, f16 dmin, 12 bytes of 6-bit scales and minimums, (Q5_K: 32 bytes of fifth bits,
      // value v: bit v / 32 of byte v % 32), 128 bytes of nibbles: value v = 64 c + 32 t + l is
      // nibble t of byte 32 c + l.
      const bool fifth_bit = dtype == DType::Q5_K;
      const float d = f16_at(b), dmin = f16_at(b + 2);
      const unsigned char* high = b + 16;
      const unsigned char* values = b + (fifth_bit ? 48 : 16);
      for (size_t i = 0; i < 8; ++i) {
        int scale, minimum;
        scale_and_min_k4(b + 4, i, scale, minimum);
        set_factors(groups[i], d, scale, dmin, minimum);
      }
      for (size_t v = 0; v < 256; ++v) {
        int q = (values[v / 64 * 32 + v % 32] >> (4 * (v % 64 / 32))) & 0x0f;
        if (fifth_bit) q |= ((high[v % 32] >> (v / 32)) & 1) << 4;
        groups[v / 32].entries[v % 32] = int8_t(q);
      }
      return;
    }
    case DType::Q6_K: {
      // 128 bytes of low nibbles (value v = 128 h + 64 t + i: nibble t of byte 64 h + i), 64
      // bytes of high 2 bits (value v = 128 h + 32 s + l: bits 2s, 2s+1 of byte 32 h + l),
      // 16 x int8 scales, f16 d. The 6-bit value is offset by 32.
      const unsigned char* low = b;
      const unsigned char* high = b + 128;
      const float d = f16_at(b + 208);
      for (size_t i = 0; i < 16; ++i) set_factors(groups[i], d, int8_t(b[192 + i]));
      for (size_t v = 0; v < 256; ++v) {
        const int l4 = (low[v / 128 * 64 + v % 64] >> (4 * (v % 128 / 64))) & 0x0f;
        const int h2 = (high[v / 128 * 32 + v % 32] >> (2 * (v % 128 / 32))) & 3;
        groups[v / 16].entries[v % 16] = int8_t((l4 | (h2 << 4)) - 32);
      }
      return;
    }
    case DType::F32:
    case DType::F16:
    case DType::BF16: break;  // not block types
  }
}

}  // namespace ditto
