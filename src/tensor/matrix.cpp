#include "tensor/matrix.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "tensor/checked.h"

namespace ditto {

void PackedMatrix::FreeDeleter::operator()(void* p) const { std::free(p); }

namespace {

// Element k of source row source_rows[n] goes to panel n / 16, position k * 16 + n % 16.
// Elements are copied with memcpy: the source may be unaligned (safetensors and GGUF offsets
// need not be).
template <size_t kElement>
void pack_panels(const unsigned char* source, size_t rows, size_t cols, std::span<const size_t> source_rows,
                 unsigned char* out) {
  for (size_t n = 0; n < rows; ++n) {
    unsigned char* panel = out + ((n / kPanelRows) * cols * kPanelRows + n % kPanelRows) * kElement;
    const unsigned char* row = source + (source_rows.empty() ? n : source_rows[n]) * cols * kElement;
    for (size_t k = 0; k < cols; ++k) std::memcpy(panel + k * kPanelRows * kElement, row + k * kElement, kElement);
  }
}

// The f16 that a tile's field `value` was widened from: the file's own f16 scale or minimum, so
// narrowing is exact, NaN payloads included (f32_to_f16 would set a NaN's quiet bit; the f16 it
// came from had its payload in bits 13..22).
uint16_t file_f16(float value) {
  const uint32_t bits = f32_bits(value);
  const auto half =
      uint16_t(std::isnan(value) ? (bits >> 16 & 0x8000u) | 0x7c00u | (bits >> 13 & 0x3ffu) : f32_to_f16(value));
  if (f32_bits(f16_to_f32(half)) != bits) throw Error("a quantised tile's f16 field does not hold its value");
  return half;
}

// Group b of source row source_rows[n] goes to tile b of panel n / 16, column n % 16 (`out` zeroed).
template <DType kDtype>
void pack_tiles(const unsigned char* source, size_t rows, size_t cols, std::span<const size_t> source_rows,
                ExactTile<kDtype>* out) {
  using Tile = ExactTile<kDtype>;
  constexpr size_t G = Tile::kGroup;
  const size_t block = dtype_block_elements(kDtype);
  const size_t groups_per_block = block / G;
  const auto field = [](float value) {
    if constexpr (Tile::kFieldType == DType::F16)
      return file_f16(value);
    else
      return value;
  };
  QuantGroup groups[kMaxQuantGroups];
  for (size_t n = 0; n < rows; ++n) {
    const unsigned char* row = source + (source_rows.empty() ? n : source_rows[n]) * dtype_bytes(kDtype, cols);
    const size_t j = n % kPanelRows;
    Tile* panel = out + (n / kPanelRows) * (cols / G);
    for (size_t at = 0; at < cols; at += block) {
      read_block(kDtype, row + dtype_bytes(kDtype, at), groups);
      for (size_t g = 0; g < groups_per_block; ++g) {
        Tile& tile = panel[at / G + g];
        tile.fields[j] = field(groups[g].scale);
        if constexpr (Tile::kMinimum) tile.fields[kPanelRows + j] = field(exact_minimum_term(kDtype, groups[g].minimum));
        for (size_t i = 0; i < G; ++i) {
          if constexpr (Tile::kNibbles)
            tile.entries[i / 2][j] |= uint8_t((groups[g].entries[i] + int8_packing(kDtype).offset) << (i % 2 * 4));
          else
            tile.entries[i][j] = groups[g].entries[i];
        }
      }
    }
  }
}

// Group h's `value` of output o into a tile's scales or minimums stored as `field` at `fields`
// (matrix.h): the file's f16 it was widened from; its factors, the f16 `factor` (as it is, or
// negated) and the `integer`; or the f32 itself. Throws unless the tile reads back its bits.
void store_int8_field(Int8Field field, unsigned char* fields, size_t h, size_t o, float value, float factor,
                      int integer) {
  unsigned char* at = fields + int8_field_at(field, h, o);
  switch (field) {
    case Int8Field::F16: {
      const uint16_t half = file_f16(value);
      std::memcpy(at, &half, 2);
      break;
    }
    case Int8Field::Factored: {
      // A minimum term -(dmin * m) with an infinite dmin and m = 0 is the NaN that the product
      // of infinity and 0 gives, negated: no product of -dmin gives it, the NaN itself times 0
      // does (Q5_K's tile holds one group, whose factor is its own).
      if (f32_bits(factor * float(integer)) != f32_bits(value) && std::isnan(value)) factor = value;
      const uint16_t half = file_f16(factor);
      std::memcpy(at, &half, 2);
      fields[int8_integer_at(h, o)] = uint8_t(int8_t(integer));
      break;
    }
    case Int8Field::F32: std::memcpy(at, &value, 4); break;
  }
  if (f32_bits(int8_field_value(field, fields, h, o)) != f32_bits(value))
    throw Error("an int8 tile's field does not hold its value");
}

// The same groups into Int8 tiles (matrix.h): group g of source row source_rows[n] goes to
// tile g G / 32 of panel n / 16, column n % 16; its entries, as unsigned (or signed) bytes or
// nibbles and their high bits, to their quads.
void pack_int8_tiles(DType dtype, const unsigned char* source, size_t rows, size_t cols,
                     std::span<const size_t> source_rows, unsigned char* out) {
  const Int8Packing packing = int8_packing(dtype);
  const size_t block = dtype_block_elements(dtype), group = quant_group_size(dtype);
  const size_t tile_bytes = int8_tile_bytes(dtype), entries_at = int8_fields_bytes(dtype);
  QuantGroup groups[kMaxQuantGroups];
  for (size_t n = 0; n < rows; ++n) {
    const unsigned char* row = source + (source_rows.empty() ? n : source_rows[n]) * dtype_bytes(dtype, cols);
    const size_t o = n % kPanelRows;
    unsigned char* panel = out + (n / kPanelRows) * (cols / kInt8Block) * tile_bytes;
    for (size_t at = 0; at < cols; at += block) {
      read_block(dtype, row + dtype_bytes(dtype, at), groups);
      for (size_t g = 0; g < block / group; ++g) {
        const size_t k0 = at + g * group;
        unsigned char* tile = panel + k0 / kInt8Block * tile_bytes;
        const size_t h = k0 % kInt8Block / group;
        const QuantGroup& q = groups[g];
        store_int8_field(packing.scale_field, tile, h, o, q.scale, q.d, q.scale_factor);
        if (packing.minimum) {
          const bool negated = quant_minimum(dtype) == QuantMinimum::Subtracted;
          store_int8_field(packing.minimum_field, tile + int8_minimums_at(dtype), h, o,
                           negated ? -q.minimum : q.minimum, negated ? -q.dmin : q.dmin, q.minimum_factor);
        }
        for (size_t i = 0; i < group; ++i) {
          const size_t k = (k0 + i) % kInt8Block;
          const int e = groups[g].entries[i];
          const auto stored = uint8_t(packing.signed_entries ? e : e + packing.offset);
          if (packing.nibbles()) {
            const uint8_t nibble = stored & 0x0f;
            tile[entries_at + k / 8 * 64 + o * 4 + k % 4] |= uint8_t(k % 8 < 4 ? nibble : nibble << 4);
            if (packing.high_bits() != 0) {
              const size_t high_at = k / 4 * packing.high_bits();  // bit of the planes
              tile[entries_at + kInt8Nibbles + high_at / 8 * 64 + o * 4 + k % 4] |= uint8_t(stored >> 4 << high_at % 8);
            }
          } else
            tile[entries_at + k / 4 * 64 + o * 4 + k % 4] = stored;
        }
      }
    }
  }
}

}  // namespace

size_t PackedMatrix::packed_bytes(DType dtype, size_t rows, size_t cols, Numerics numerics) {
  const MatrixView shape{dtype, rows, cols, nullptr, is_quantized(dtype) ? numerics : Numerics::Exact};
  const std::string what = "a packed " + std::to_string(rows) + " x " + std::to_string(cols) + " matrix";
  // A panel takes at most 64 bytes per column (f32; the quantised tiles take at most 20), so
  // checking that bound first lets panel_bytes() compute it.
  checked_mul(cols, kPanelRows * sizeof(float), what);
  return checked_round_up(checked_mul(shape.panels(), shape.panel_bytes(), what), 64, what);
}

PackedMatrix PackedMatrix::pack(DType dtype, size_t rows, size_t cols, const void* source,
                                std::span<const size_t> source_rows, Numerics numerics) {
  if (!is_quantized(dtype)) numerics = Numerics::Exact;
  const size_t bytes = packed_bytes(dtype, rows, cols, numerics);
  void* storage = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  if (storage == nullptr) throw std::bad_alloc();
  std::memset(storage, 0, bytes);
  const auto* in = static_cast<const unsigned char*>(source);
  auto* out = static_cast<unsigned char*>(storage);
  switch (dtype) {
    case DType::F32: pack_panels<dtype_size(DType::F32)>(in, rows, cols, source_rows, out); break;
    case DType::F16:
    case DType::BF16: pack_panels<dtype_size(DType::F16)>(in, rows, cols, source_rows, out); break;
    default:
      if (numerics == Numerics::Int8)
        pack_int8_tiles(dtype, in, rows, cols, source_rows, out);
      else
        with_exact_tile_type(dtype, [&](auto tile) {
          pack_tiles(in, rows, cols, source_rows, static_cast<typename decltype(tile)::type*>(storage));
        });
  }
  PackedMatrix packed;
  packed.storage_.reset(storage);
  packed.view_ = MatrixView{dtype, rows, cols, storage, numerics};
  return packed;
}

}  // namespace ditto
