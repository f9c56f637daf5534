#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <type_traits>

#include "ditto/dtype.h"
#include "ditto/numerics.h"
#include "tensor/quant.h"

namespace ditto {

// A weight matrix as the kernels read it: `rows` output features by `cols` input features,
// packed in panels of kPanelRows outputs. Panel p holds outputs 16p .. 16p+15 for every
// input k, k-major: element (n, k) lies at panel n / 16, position k * 16 + n % 16. A matmul
// then broadcasts one activation and multiplies a whole panel row with it, so each output
// stays one sequential chain over k (docs/numerics.md). The last panel is zero-padded.
// A quantised matrix is packed in the same panels, as one ExactTile per group of inputs that
// share a scale (quant_group_size: 32, or 16): panel p holds the tiles of inputs 0..G-1,
// G..2G-1, ... of its 16 outputs.
inline constexpr size_t kPanelRows = 16;

// Whether an exact tile holds its entries as nibbles, two to a byte: the types whose entries
// plus their offset (int8_packing) fit in 4 bits (Q4_0, Q4_1, Q2_K, Q3_K, Q4_K). Decode streams
// the tiles, and then reads 4 bits an entry instead of 8.
constexpr bool exact_nibbles(DType dtype) {
  const Int8Packing packing = int8_packing(dtype);
  return packing.nibbles() && packing.high_bits() == 0;
}

// What an exact tile holds for a minimum: the term one fma adds to scale * entry, so -minimum
// for the types that subtract it — but a NaN as it is, since product - NaN gives the NaN's own
// bits (the kernel's MulSub instead left its sign to the compiler: a clang Release build flipped
// it, e.g. on AVX3 and AVX3_DL). Its own inverse.
inline float exact_minimum_term(DType dtype, float minimum) {
  return quant_minimum(dtype) == QuantMinimum::Subtracted && !std::isnan(minimum) ? -minimum : minimum;
}

// G inputs x 16 outputs of a quantised matrix of kDtype (G = quant_group_size): the 16 outputs'
// scales, then for the types with a minimum their minimum terms (QuantGroup, exact_minimum_term),
// as f16 where they are the file's own f16 fields (the 32-input types: Int8Field::F16),
// which f16 holds exactly, else f32 (the K-quants' products); then the entries input-major, so
// that a vector load reads one input of all 16 outputs: one per byte, or with kNibbles two inputs
// to a byte, input 2c in the low 4 bits of entries[c] and input 2c + 1 in the high, each plus the
// type's offset. Entry (n, k) is dequantize(dtype, scale(n%16), exact_minimum_term(dtype,
// minimum_term(n%16)), entry(k%G, n%16)). Only what the type has is stored, as small as it holds
// it: decode streams the tiles (Q8_0 and Q5_0 take 8.5 bits a weight, where f32 fields and a
// minimum of 0 took 10; Q4_0 4.5, Q4_1 5, Q6_K 10 instead of 6, 6 and 12).
template <DType kDtype>
struct ExactTile {
  static constexpr size_t kGroup = quant_group_size(kDtype);
  static constexpr bool kNibbles = exact_nibbles(kDtype);
  static constexpr bool kMinimum = quant_minimum(kDtype) != QuantMinimum::None;
  static constexpr DType kFieldType = int8_packing(kDtype).scale_field == Int8Field::F16 ? DType::F16 : DType::F32;
  using Field = std::conditional_t<kFieldType == DType::F16, uint16_t, float>;

  Field fields[(kMinimum ? 2 : 1) * kPanelRows];  // scales, then minimum terms
  std::conditional_t<kNibbles, uint8_t[kGroup / 2][kPanelRows], int8_t[kGroup][kPanelRows]> entries;

  const Field* scales() const { return fields; }
  const Field* minimum_terms() const { return fields + kPanelRows; }  // only with kMinimum
  float scale(size_t o) const { return widen(fields[o]); }
  float minimum_term(size_t o) const {
    if constexpr (kMinimum) return widen(fields[kPanelRows + o]);
    return 0.0f;
  }
  int entry(size_t i, size_t o) const {
    if constexpr (kNibbles) {
      const unsigned byte = entries[i / 2][o];
      return int(i % 2 == 0 ? byte & 0x0f : byte >> 4) - int8_packing(kDtype).offset;
    } else {
      return entries[i][o];
    }
  }

 private:
  static float widen(Field field) {
    if constexpr (kFieldType == DType::F16) return f16_to_f32(field);
    return field;
  }
};

// Calls visit(std::type_identity<ExactTile<T>>{}) for a quantised type T known only when running.
template <class Visit>
constexpr decltype(auto) with_exact_tile_type(DType dtype, const Visit& visit) {
  switch (dtype) {
    case DType::Q8_0: return visit(std::type_identity<ExactTile<DType::Q8_0>>{});
    case DType::Q4_0: return visit(std::type_identity<ExactTile<DType::Q4_0>>{});
    case DType::Q4_1: return visit(std::type_identity<ExactTile<DType::Q4_1>>{});
    case DType::Q5_0: return visit(std::type_identity<ExactTile<DType::Q5_0>>{});
    case DType::Q5_1: return visit(std::type_identity<ExactTile<DType::Q5_1>>{});
    case DType::Q2_K: return visit(std::type_identity<ExactTile<DType::Q2_K>>{});
    case DType::Q3_K: return visit(std::type_identity<ExactTile<DType::Q3_K>>{});
    case DType::Q4_K: return visit(std::type_identity<ExactTile<DType::Q4_K>>{});
    case DType::Q5_K: return visit(std::type_identity<ExactTile<DType::Q5_K>>{});
    case DType::Q6_K: return visit(std::type_identity<ExactTile<DType::Q6_K>>{});
    case DType::F32:
    case DType::F16:
    case DType::BF16: break;
  }
  throw std::invalid_argument("a dense type has no quantised tiles");
}
// Bytes of an exact tile of a quantised type.
constexpr size_t exact_tile_bytes(DType dtype) {
  return with_exact_tile_type(dtype, [](auto tile) { return sizeof(typename decltype(tile)::type); });
}

// The int8 numerics pack a quantised matrix for integer dot products instead (int8_packing):
// per panel and block of 32 inputs one tile of int8_tile_bytes(dtype) bytes, holding the 16
// outputs' scales of each group of the block, then their minimums (only for types with one;
// negated for the types that subtract it, as the int8 chain adds it: int8_minimum_term), each
// stored as Int8Packing says (int8_field_bytes): F16, [groups][16] f16 (the file's own fields as
// they are); Factored, [16] f16 factors (the super-block's d, dmin or -dmin) then [groups][16]
// signed bytes (the group's integers), whose f32 product is the value; F32, [groups][16] f32. So
// decode, which streams the tiles, reads little more than the file holds. Then the entries,
// stored unsigned as entry + offset (Q8_0: signed) in quads of inputs: byte 64 j + 4 o + t holds
// input 4 j + t of output o, so that each 32-bit lane holds four consecutive inputs of one
// output, the four products vpdpbusd (and pmaddubsw + pmaddwd) sum into it. Nibbles: byte
// 64 c + 4 o + t holds input 8 c + t of output o in its low 4 bits and input 8 c + 4 + t in its
// high 4 bits. The bits above the nibble (b = high_bits of them) of input 4 q + t (quad q) of
// output o follow in planes of 64 bytes: bits (q b) % 8 .. of byte 4 o + t of plane q b / 8. A
// vector of a quad's nibbles then finds its high bits at the same byte positions of one plane, a
// shift and a mask away, and the 5-bit types take 5.5 bits a weight as in the file, not a byte.
inline constexpr size_t kInt8ByteEntries = 512;  // a tile's entries one per byte
inline constexpr size_t kInt8Nibbles = 256;      // its nibbles, which the planes follow
// Bytes of a tile's scales, or minimums, of `groups` groups stored as `field`.
constexpr size_t int8_field_bytes(Int8Field field, size_t groups) {
  switch (field) {
    case Int8Field::F16: return groups * kPanelRows * 2;
    case Int8Field::Factored: return kPanelRows * 2 + groups * kPanelRows;
    case Int8Field::F32: break;
  }
  return groups * kPanelRows * 4;
}
// Where, in fields stored as `field`, group h's value of output o lies (F16, F32), or output o's
// f16 factor (Factored); and a Factored field's integer of group h and output o.
constexpr size_t int8_field_at(Int8Field field, size_t h, size_t o) {
  switch (field) {
    case Int8Field::F16: return (h * kPanelRows + o) * 2;
    case Int8Field::Factored: return o * 2;
    case Int8Field::F32: break;
  }
  return (h * kPanelRows + o) * 4;
}
constexpr size_t int8_integer_at(size_t h, size_t o) { return kPanelRows * 2 + h * kPanelRows + o; }
// Group h's scale or minimum of output o, of a tile's fields stored as `field` at `fields`.
inline float int8_field_value(Int8Field field, const unsigned char* fields, size_t h, size_t o) {
  const unsigned char* at = fields + int8_field_at(field, h, o);
  if (field == Int8Field::F32) {
    float value;
    std::memcpy(&value, at, 4);
    return value;
  }
  uint16_t half;
  std::memcpy(&half, at, 2);
  if (field == Int8Field::F16) return f16_to_f32(half);
  return f16_to_f32(half) * float(int8_t(fields[int8_integer_at(h, o)]));
}
// A tile's scales: its minimums start this far into it.
constexpr size_t int8_minimums_at(DType dtype) {
  const Int8Packing packing = int8_packing(dtype);
  return int8_field_bytes(packing.scale_field, packing.groups);
}
// A tile's scales and minimums: the entries start this far into it.
constexpr size_t int8_fields_bytes(DType dtype) {
  const Int8Packing packing = int8_packing(dtype);
  return int8_minimums_at(dtype) + (packing.minimum ? int8_field_bytes(packing.minimum_field, packing.groups) : 0);
}
constexpr size_t int8_entry_bytes(DType dtype) {
  const Int8Packing packing = int8_packing(dtype);
  return packing.nibbles() ? kInt8Nibbles + 64 * packing.high_bits() : kInt8ByteEntries;
}
constexpr size_t int8_tile_bytes(DType dtype) { return int8_fields_bytes(dtype) + int8_entry_bytes(dtype); }

struct MatrixView {
  DType dtype = DType::F32;
  size_t rows = 0;
  size_t cols = 0;
  const void* data = nullptr;  // 64-byte aligned
  Numerics numerics = Numerics::Exact;  // Int8 only for a quantised dtype: packed in Int8 tiles

  size_t panels() const { return (rows + kPanelRows - 1) / kPanelRows; }
  size_t panel_bytes() const {
    if (!is_quantized(dtype)) return cols * kPanelRows * dtype_size(dtype);
    if (numerics == Numerics::Int8) return cols / kInt8Block * int8_tile_bytes(dtype);
    return cols / quant_group_size(dtype) * exact_tile_bytes(dtype);
  }
  const void* panel(size_t p) const { return static_cast<const unsigned char*>(data) + p * panel_bytes(); }
  // The tile of a quantised matrix of kDtype (G = quant_group_size(kDtype)) for panel p and
  // inputs G*b .. G*b+G-1.
  template <DType kDtype>
  const ExactTile<kDtype>& tile(size_t p, size_t b) const {
    return static_cast<const ExactTile<kDtype>*>(panel(p))[b];
  }
  // The Int8 tile of panel p and inputs 32 b .. 32 b + 31.
  const unsigned char* int8_tile(size_t p, size_t b) const {
    return static_cast<const unsigned char*>(panel(p)) + b * int8_tile_bytes(dtype);
  }
  float at(size_t n, size_t k) const;
  // A quantised matrix in either packing: the entry (n, k) and the scale and minimum of
  // output n's group g (inputs g G .. g G + G - 1, G = quant_group_size(dtype)).
  int entry(size_t n, size_t k) const;
  float group_scale(size_t n, size_t g) const { return group_field(n, g, 0); }
  float group_minimum(size_t n, size_t g) const {
    const float stored = group_field(n, g, 1);
    if (numerics == Numerics::Exact) return exact_minimum_term(dtype, stored);
    return quant_minimum(dtype) == QuantMinimum::Subtracted ? -stored : stored;
  }
  // The Int8 packing's term fma'd with the inputs' scaled sum: the minimum, or -minimum where the
  // type subtracts it. Negated once when packed: a negation in a kernel, folded into its fma
  // (vfnmadd), would keep the sign of a NaN minimum that the reference's -minimum flips.
  float int8_minimum_term(size_t n, size_t g) const { return group_field(n, g, 1); }

 private:
  float group_field(size_t n, size_t g, size_t field) const;
  // Calls visit(tile) with the exact tile of output n's group g, of its type.
  template <class Visit>
  decltype(auto) with_exact_tile(size_t n, size_t g, const Visit& visit) const {
    const void* at = static_cast<const unsigned char*>(panel(n / kPanelRows)) + g * exact_tile_bytes(dtype);
    return with_exact_tile_type(dtype, [&](auto tile) -> decltype(auto) {
      return visit(*static_cast<const typename decltype(tile)::type*>(at));
    });
  }
};

inline float MatrixView::at(size_t n, size_t k) const {
  if (!is_quantized(dtype)) return load_as_f32(panel(n / kPanelRows), dtype, k * kPanelRows + n % kPanelRows);
  const size_t group = quant_group_size(dtype), g = k / group;
  if (numerics == Numerics::Exact)
    return with_exact_tile(n, g, [&](const auto& t) {
      const size_t o = n % kPanelRows;
      return dequantize(dtype, t.scale(o), exact_minimum_term(dtype, t.minimum_term(o)), t.entry(k % group, o));
    });
  return dequantize(dtype, group_scale(n, g), group_minimum(n, g), entry(n, k));
}

inline int MatrixView::entry(size_t n, size_t k) const {
  const size_t o = n % kPanelRows;
  if (numerics == Numerics::Exact) {
    const size_t group = quant_group_size(dtype);
    return with_exact_tile(n, k / group, [&](const auto& t) { return t.entry(k % group, o); });
  }
  const Int8Packing packing = int8_packing(dtype);
  const unsigned char* entries = int8_tile(n / kPanelRows, k / kInt8Block) + int8_fields_bytes(dtype);
  const size_t i = k % kInt8Block;
  if (packing.nibbles()) {
    const unsigned char byte = entries[i / 8 * 64 + o * 4 + i % 4];
    const unsigned nibble = i % 8 < 4 ? byte & 0x0f : byte >> 4;
    if (packing.high_bits() == 0) return int(nibble) - packing.offset;
    const size_t high_at = i / 4 * packing.high_bits();  // bit of the planes
    const unsigned plane_byte = entries[kInt8Nibbles + high_at / 8 * 64 + o * 4 + i % 4];
    const unsigned high = plane_byte >> high_at % 8 & ((1u << packing.high_bits()) - 1);
    return int(nibble | high << 4) - packing.offset;
  }
  const unsigned char byte = entries[i / 4 * 64 + o * 4 + i % 4];
  return packing.signed_entries ? int(int8_t(byte)) : int(byte) - packing.offset;
}

inline float MatrixView::group_field(size_t n, size_t g, size_t field) const {
  const size_t o = n % kPanelRows;
  if (numerics == Numerics::Exact)
    return with_exact_tile(n, g, [&](const auto& t) { return field == 0 ? t.scale(o) : t.minimum_term(o); });
  const Int8Packing packing = int8_packing(dtype);
  if (field == 1 && !packing.minimum) return 0.0f;
  const size_t groups = packing.groups;
  const unsigned char* tile = int8_tile(n / kPanelRows, g / groups);
  if (field == 0) return int8_field_value(packing.scale_field, tile, g % groups, o);
  return int8_field_value(packing.minimum_field, tile + int8_minimums_at(dtype), g % groups, o);
}

// Owns a matrix packed once, at load, from the file's bytes into the kernels' layout.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // `source` holds rows x cols elements of `dtype`, row-major, at any alignment (for a
  // quantised dtype, cols is a multiple of its block, dtype_block_elements). Packed output n is
  // source row source_rows[n], or source row n when source_rows is empty.
  // A quantised matrix is packed for `numerics`; a dense one ignores it.
  static PackedMatrix pack(DType dtype, size_t rows, size_t cols, const void* source,
                           std::span<const size_t> source_rows = {}, Numerics numerics = Numerics::Exact);
  // The memory pack() takes for such a matrix; throws ditto::Error if the size overflows.
  static size_t packed_bytes(DType dtype, size_t rows, size_t cols, Numerics numerics = Numerics::Exact);
  const MatrixView& view() const { return view_; }

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, FreeDeleter> storage_;
  MatrixView view_;
};

}  // namespace ditto
