// SIMD matmul of the int8 numerics (ref::matmul_int8, docs/numerics-quant.md) over Int8 tiles
// (src/tensor/matrix.h): each 32-bit lane holds one output's four consecutive inputs, so the
// integer dot products of a group run across the 16 outputs of a panel — vpdpbusd where the
// CPU has AVX512-VNNI, pmaddubsw and pmaddwd on AVX2 and AVX-512 — and are exact in any order.
// The f32 steps of each group then run lane by lane, in the reference's order.
#include <algorithm>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/ref/kernels.h"
#include "kernels/thread_pool.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/matmul_int8.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/simd/simd-inl.h"

HWY_BEFORE_NAMESPACE();
// Highway 1.0's AVX3_DL target string leaves out AVX512-VNNI, which its runtime check requires:
// the functions that use vpdpbusd name it (a function's own target attribute overrides the
// namespace-wide one, with GCC and clang alike).
#undef DITTO_INT8_TARGET
#if HWY_TARGET == HWY_AVX3_DL
#define DITTO_INT8_TARGET __attribute__((target(HWY_TARGET_STR ",avx512vnni")))
#else
#define DITTO_INT8_TARGET
#endif
namespace ditto::HWY_NAMESPACE {
#if DITTO_SIMD_HAS_FMA

using DI = hn::RebindToSigned<DF>;       // 32-bit lanes: one output each
using VI = hn::Vec<DI>;
using DB = hn::Repartition<int8_t, DF>;  // bytes: four inputs of each output
using VB = hn::Vec<DB>;
using DH = hn::Repartition<int16_t, DF>;
using VH = hn::Vec<DH>;

constexpr size_t kLanesF = hn::MaxLanes(DF());
constexpr size_t kVectorsPerPanel = kPanelRows / kLanesF;
constexpr size_t kVectorBytes = 4 * kLanesF;  // the bytes of one vector of a quad
constexpr bool kVnni = HWY_TARGET == HWY_AVX3_DL;
// Register tiles: rows x panels (prefill) and 1 x panels (decode).
constexpr size_t kTileRows = kLanesF == 16 ? 4 : 2;
constexpr size_t kTilePanels = kLanesF == 16 ? (kVnni ? 3 : 2) : 1;
constexpr size_t kDecodePanels = kLanesF == 16 ? 4 : 2;
// Whether a decode tile prefetches the next group's weights as the row tiles of a chunk do. On
// AVX2 a tile's integer products take several instructions per 32 bytes of weights, and without
// it the loads waited on memory: tg64 on Zen 4 (AVX2 kernels, medians of 8 interleaved runs)
// SmolLM2 Q4_1 120 -> 138 t/s, Gemma 3 270M 59 -> 64. With AVX-512's 4-panel tiles it made
// decode 5-15% slower (AVX3 and AVX3_DL alike), as it did the exact path's on AVX2. Into L2, not
// L1: decode, Gemma's tg64 with the AVX2 kernels, two threads, medians of 5 interleaved runs
// 102.3 -> 112.4 t/s (one thread 66.0 -> 73.3), SmolLM2's 238.7 -> 244.2; and a chunk's row tiles
// (int8 pp512 in chunks of 16 on a 2-core Xeon, medians of 5-7 interleaved runs: Gemma 3 270M
// 1454 -> 1500 t/s, SmolLM2 1438 -> 1450, with the AVX2 kernels 754 -> 771 and 730 -> 741; whole
// prompts within 2%: most likely the next group's lines wait less for L1's few miss buffers).
// Where it does not, a decode tile asks for each panel's tile kDecodeAheadTiles ahead, into L2, as
// the exact decode tiles do: Gemma 3 270M tg64 with the AVX3_DL kernels on Zen 4, medians of
// interleaved runs, one thread 53 -> 59-63 t/s, two threads 86-90 -> 95 (two tiles ahead alike,
// eight less; SmolLM2 unchanged).
constexpr bool kPrefetchDecode = kLanesF == 8;

// The integer products. MulPairs: u[2i] * s[2i] + u[2i+1] * s[2i+1] of unsigned bytes u and
// signed bytes s in 16 bits (pmaddubsw: exact while the sum stays below 2^15); SumPairs: the
// sum of each pair of 16-bit lanes in 32 bits; DotQuads: acc plus the four products of each
// 32-bit lane (vpdpbusd: exact for any bytes).
#if HWY_TARGET == HWY_AVX2
HWY_INLINE VH MulPairs(VB u, VB s) { return VH{_mm256_maddubs_epi16(u.raw, s.raw)}; }
HWY_INLINE VI SumPairs(VH v) { return VI{_mm256_madd_epi16(v.raw, _mm256_set1_epi16(1))}; }
// s with the sign of w (s where w > 0, -s where w < 0, 0 where w == 0).
HWY_INLINE VB SignOf(VB s, VB w) { return VB{_mm256_sign_epi8(s.raw, w.raw)}; }
#else
HWY_INLINE VH MulPairs(VB u, VB s) { return VH{_mm512_maddubs_epi16(u.raw, s.raw)}; }
HWY_INLINE VI SumPairs(VH v) { return VI{_mm512_madd_epi16(v.raw, _mm512_set1_epi16(1))}; }
HWY_INLINE VB SignOf(VB s, VB w) {
  return VB{_mm512_mask_sub_epi8(s.raw, _mm512_movepi8_mask(w.raw), _mm512_setzero_si512(), s.raw)};
}
#endif
#if HWY_TARGET == HWY_AVX3_DL
DITTO_INT8_TARGET HWY_INLINE VI DotQuads(VI acc, VB u, VB s) { return VI{_mm512_dpbusd_epi32(acc.raw, u.raw, s.raw)}; }
#else
HWY_INLINE VI DotQuads(VI acc, VB u, VB s) { return hn::Add(acc, SumPairs(MulPairs(u, s))); }
#endif

// Four int8 inputs, broadcast to every 32-bit lane.
HWY_INLINE VB BroadcastQuad(const int8_t* x) {
  int32_t four;
  std::memcpy(&four, x, 4);
  return hn::BitCast(DB(), hn::Set(DI(), four));
}

// Vector v of the high bits of quad j of a tile's entries (the planes after the nibbles,
// matrix.h), moved to bits 4 and up of each byte.
template <DType kDtype>
HWY_INLINE VB HighBits(const unsigned char* entries, size_t j, size_t v) {
  constexpr size_t kBits = int8_packing(kDtype).high_bits();
  const DB db;
  const hn::Repartition<uint16_t, DF> d16;  // shifts of 16-bit lanes: the mask drops what crossed bytes
  const size_t at = j * kBits;              // bit of the planes
  const int8_t* bytes = reinterpret_cast<const int8_t*>(entries + kInt8Nibbles + at / 8 * 64 + v * kVectorBytes);
  const auto plane = hn::BitCast(d16, hn::LoadU(db, bytes));
  const int shift = 4 - int(at % 8);
  const auto moved = shift >= 0 ? hn::ShiftLeftSame(plane, shift) : hn::ShiftRightSame(plane, -shift);
  return hn::And(hn::BitCast(db, moved), hn::Set(db, int8_t(((1 << kBits) - 1) << 4)));
}

// A tile unpacked (UnpackTiles): its scales and minimums as f32 ([groups][16] each), then its 512
// entries one per byte.
constexpr size_t UnpackedFieldsBytes(DType dtype) {
  const Int8Packing packing = int8_packing(dtype);
  return int8_field_bytes(Int8Field::F32, packing.groups) * (packing.minimum ? 2 : 1);
}
constexpr size_t UnpackedTileBytes(DType dtype) { return UnpackedFieldsBytes(dtype) + kInt8ByteEntries; }
// Whether a chunk's row tiles share one unpacking of a group's tiles rather than each unpacking
// in registers: for the types with planes of high bits, whose unpacking costs a tile as much
// again as the nibbles' (Gemma 3 270M, mostly Q5_0, AVX2 kernels on Zen 4: pp512 in chunks of 16
// at 0.72 of the speed with entries a byte each unpacking in registers, 0.91 shared; whole
// prompts 0.96).
constexpr bool SharesUnpacking(DType dtype) { return int8_packing(dtype).high_bits() != 0; }
// The row tiles of several rows never multiply the factors of a Factored field (quant.h) for
// themselves: they read the unpacking's f32 (Qwen3-0.6B shapes Q4_K_M, int8 pp256 on a 2-core
// Xeon: 6-10% slower with Q4_K's nibbles Factored, whether each row tile multiplied or shared).
static_assert([] {
  for (DType dtype : kQuantizedDTypes)
    if (int8_packing(dtype).scale_field == Int8Field::Factored && !SharesUnpacking(dtype)) return false;
  return true;
}(), "Factored fields only where the row tiles share an unpacking");
// Where a tile's entries come from: packed as the matrix holds them (nibbles and planes); one per
// byte (kUnpacked: by UnpackTiles, or by the row tile before); or packed, and stored one per byte
// as the tile unpacks them, for the row tiles after it (kUnpacking).
enum class Entries { kPacked, kUnpacked, kUnpacking };
// Whether a chunk's first row tile unpacks the group's tiles for the others (kUnpacking) rather
// than UnpackTiles before it: with AVX-512, where the first tile's integer products then run
// beside its unpacking and its wait for the weights (Gemma 3 270M int8 pp512 in chunks of 16 on
// a 2-core Xeon, medians of interleaved runs: 1629 -> 1694 t/s on 2 threads, 873 -> 906 on one,
// AVX3 without VNNI 1372 -> 1428; whole prompts the same); AVX2's tiles of 2 rows with 16
// registers were 4% slower so (981 -> 942).
constexpr bool kFirstTileUnpacks = kLanesF == 16;

// Vector v of quads j and j + 1 (j even) of a tile's entries, as bytes (unsigned, or Q8_0's
// signed bytes): from nibbles and planes where the type packs them (and kUnpacked does not say
// they are bytes already).
template <DType kDtype, bool kUnpacked = false>
HWY_INLINE void LoadQuadPair(const unsigned char* entries, size_t j, size_t v, VB& first, VB& second) {
  const DB db;
  if constexpr (int8_packing(kDtype).nibbles() && !kUnpacked) {
    const VB both = hn::LoadU(db, reinterpret_cast<const int8_t*>(entries + j / 2 * 64 + v * kVectorBytes));
    const VB low = hn::Set(db, 0x0f);
    first = hn::And(both, low);
    second = hn::And(hn::BitCast(db, hn::ShiftRight<4>(hn::BitCast(hn::Repartition<uint16_t, DF>(), both))), low);
    if constexpr (int8_packing(kDtype).high_bits() != 0) {
      first = hn::Or(first, HighBits<kDtype>(entries, j, v));
      second = hn::Or(second, HighBits<kDtype>(entries, j + 1, v));
    }
  } else {
    first = hn::LoadU(db, reinterpret_cast<const int8_t*>(entries + j * 64 + v * kVectorBytes));
    second = hn::LoadU(db, reinterpret_cast<const int8_t*>(entries + (j + 1) * 64 + v * kVectorBytes));
  }
}

// Lanes lane .. lane + kLanesF - 1 of group h of a tile's scales or minimums stored as kField at
// `fields` (matrix.h), as f32: the f16 widened exactly, or the product of the factors, exact.
template <Int8Field kField>
HWY_INLINE VF LoadField(const unsigned char* fields, size_t h, size_t lane) {
  const DF df;
  const unsigned char* at = fields + int8_field_at(kField, h, lane);
  if constexpr (kField == Int8Field::Factored) {
    const auto* integers = reinterpret_cast<const int8_t*>(fields + int8_integer_at(h, lane));
    const VF integer = hn::ConvertTo(df, hn::PromoteTo(DI(), hn::LoadU(hn::Rebind<int8_t, DF>(), integers)));
    return hn::Mul(LoadWidened(df, DType::F16, at), integer);
  }
  return LoadWidened(df, kField == Int8Field::F16 ? DType::F16 : DType::F32, at);
}

// Stores lanes lane .. lane + kLanesF - 1 of group h's scales (and minimums) to a tile unpacked
// at `unpacked`, as f32 (the minimum by reference: a type without one passes one never set).
template <DType kDtype>
HWY_INLINE void StoreUnpackedFields(VF scale, const VF& minimum, unsigned char* unpacked, size_t h, size_t lane) {
  constexpr Int8Field kF32 = Int8Field::F32;
  constexpr size_t kMinimumsAt = int8_field_bytes(kF32, int8_packing(kDtype).groups);
  hn::StoreU(scale, DF(), reinterpret_cast<float*>(unpacked + int8_field_at(kF32, h, lane)));
  if constexpr (int8_packing(kDtype).minimum)
    hn::StoreU(minimum, DF(), reinterpret_cast<float*>(unpacked + kMinimumsAt + int8_field_at(kF32, h, lane)));
}

// R rows (m0 .. m0+R-1 of `in`, of which valid_rows exist) x P panels (`panels`, each
// panel_bytes long; kUnpacked: tiles of UnpackedTileBytes): every output's chain over the groups,
// stored to y. Prefetches its share of `prefetch` spread over the blocks. kUnpacking: also stores
// the tiles unpacked to `unpack_to`, as UnpackTiles would.
template <DType kDtype, size_t R, size_t P, Entries kEntries>
DITTO_INT8_TARGET HWY_NOINLINE void Int8Tile(const ref::Int8Rows& in, size_t m0, size_t valid_rows, const unsigned char* panels,
                           size_t panel_bytes, float* y, size_t y_stride, size_t valid_columns, Prefetch prefetch,
                           unsigned char* unpack_to) {
  constexpr Int8Packing kPacking = int8_packing(kDtype);
  constexpr size_t kGroups = kPacking.groups, kQuads = 8 / kGroups;  // quads of inputs per group
  constexpr bool kUnpacked = kEntries == Entries::kUnpacked;
  // How the tiles read store their fields (unpacked: f32), and where their minimums and entries
  // start; where kUnpacking stores them.
  constexpr Int8Field kScaleField = kUnpacked ? Int8Field::F32 : kPacking.scale_field;
  constexpr Int8Field kMinimumField = kUnpacked ? Int8Field::F32 : kPacking.minimum_field;
  constexpr size_t kMinimumsAt = int8_field_bytes(kScaleField, kGroups);
  constexpr size_t kEntriesAt = kUnpacked ? UnpackedFieldsBytes(kDtype) : int8_fields_bytes(kDtype);
  constexpr size_t kTileBytes = kUnpacked ? UnpackedTileBytes(kDtype) : int8_tile_bytes(kDtype);
  constexpr size_t kVectors = P * kVectorsPerPanel;
  // pmaddubsw sums of this many quads add up in 16 bits (inputs are at most 127 in magnitude).
  constexpr size_t kRun = std::min<size_t>(kQuads, 32767 / (2 * 127 * kPacking.largest));
  // Subtracted from each integer product times the group's sum of inputs (with vpdpbusd, the
  // chain's start): the unsigned storage's offset; for Q8_0 the 128 that vpdpbusd's unsigned
  // operand adds (pmaddubsw uses |w| and signs).
  constexpr int kCorrection = kPacking.signed_entries ? (kVnni ? 128 : 0) : kPacking.offset;
  const DF df;
  const DI di;
  const DB db;
  const size_t cols = in.cols, blocks = in.blocks(), groups = in.groups();
  VF acc[R][kVectors];
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < kVectors; ++v) acc[r][v] = hn::Zero(df);
  for (size_t b = 0; b < blocks; ++b) {
    PrefetchStep(prefetch, b, blocks);
    const unsigned char* tile[P];
    for (size_t p = 0; p < P; ++p) tile[p] = panels + p * panel_bytes + b * kTileBytes;
    unsigned char* unpacked[P];
    if constexpr (kEntries == Entries::kUnpacking)
      for (size_t p = 0; p < P; ++p) unpacked[p] = unpack_to + (p * blocks + b) * UnpackedTileBytes(kDtype);
    if constexpr (R == 1 && !kPrefetchDecode)
      if (b + kDecodeAheadTiles < blocks)
        for (size_t p = 0; p < P; ++p)
          for (size_t line = 0; line < kTileBytes; line += 64)
            PrefetchIntoL2(tile[p] + kDecodeAheadTiles * kTileBytes + line);
    // Unrolled with AVX-512, so that the high bits' shifts (HighBits) are by constants: GCC 12
    // left the quad loop rolled, shifting by a register and branching on the direction (Gemma 3
    // 270M tg64 with the AVX3_DL kernels 5% faster unrolled; with AVX2's 16 registers 3% slower).
#if HWY_TARGET != HWY_AVX2
#pragma GCC unroll 2
#endif
    for (size_t h = 0; h < kGroups; ++h) {
      VI dot[R][kVectors];
      VH part[R][kVectors];
#if HWY_TARGET != HWY_AVX2
#pragma GCC unroll 4
#endif
      for (size_t i = 0; i < kQuads; i += 2) {
        const size_t j = h * kQuads + i;
        VB w[2][kVectors];
        for (size_t v = 0; v < kVectors; ++v) {
          LoadQuadPair<kDtype, kUnpacked>(tile[v / kVectorsPerPanel] + kEntriesAt, j, v % kVectorsPerPanel, w[0][v],
                                          w[1][v]);
          if constexpr (kEntries == Entries::kUnpacking) {
            unsigned char* to =
                unpacked[v / kVectorsPerPanel] + UnpackedFieldsBytes(kDtype) + (v % kVectorsPerPanel) * kVectorBytes;
            hn::StoreU(w[0][v], db, reinterpret_cast<int8_t*>(to + j * 64));
            hn::StoreU(w[1][v], db, reinterpret_cast<int8_t*>(to + (j + 1) * 64));
          }
          if constexpr (kVnni && kPacking.signed_entries) {
            w[0][v] = hn::Xor(w[0][v], hn::Set(db, int8_t(-128)));
            w[1][v] = hn::Xor(w[1][v], hn::Set(db, int8_t(-128)));
          }
        }
        for (size_t s = 0; s < 2; ++s) {
          const size_t quad = i + s;  // within the group
          for (size_t r = 0; r < R; ++r) {
            const VB x = BroadcastQuad(in.values.data() + (m0 + r) * cols + b * kInt8Block + 4 * (j + s));
            // vpdpbusd's chains start at minus the correction (exact in integers), which spares
            // each output its subtraction after them (Gemma 3 270M int8 pp512 on a Xeon, medians
            // of interleaved runs: 2553 -> 2631 t/s, 2304 -> 2338 at a busier moment).
            const VI start = kVnni && quad == 0
                                 ? hn::Set(di, -kCorrection * in.sums[(m0 + r) * groups + b * kGroups + h])
                                 : hn::Zero(di);
            for (size_t v = 0; v < kVectors; ++v) {
              if constexpr (kVnni) {
                dot[r][v] = DotQuads(quad == 0 ? start : dot[r][v], w[s][v], x);
              } else {
                const VH t = kPacking.signed_entries ? MulPairs(hn::Abs(w[s][v]), SignOf(x, w[s][v]))
                                                     : MulPairs(w[s][v], x);
                part[r][v] = quad % kRun == 0 ? t : hn::Add(part[r][v], t);
                if (quad % kRun == kRun - 1)
                  dot[r][v] = quad < kRun ? SumPairs(part[r][v]) : hn::Add(dot[r][v], SumPairs(part[r][v]));
              }
            }
          }
        }
      }
      VF scale[kVectors], minimum[kVectors];
      for (size_t v = 0; v < kVectors; ++v) {
        const size_t lane = (v % kVectorsPerPanel) * kLanesF;
        scale[v] = LoadField<kScaleField>(tile[v / kVectorsPerPanel], h, lane);
        // +-minimum as packed (MatrixView::int8_minimum_term): a negation here, or NegMulAdd, would
        // leave the sign of a NaN operand to the compiler (GCC's vfnmadd negates none; clang's
        // _mm512_fnmadd_ps negates s and its _mm256_fnmadd_ps the minimum, unless it optimises
        // them, or a Neg, into vfnmadd).
        if constexpr (kPacking.minimum)
          minimum[v] = LoadField<kMinimumField>(tile[v / kVectorsPerPanel] + kMinimumsAt, h, lane);
        if constexpr (kEntries == Entries::kUnpacking)
          StoreUnpackedFields<kDtype>(scale[v], minimum[v], unpacked[v / kVectorsPerPanel], h, lane);
      }
      const size_t g = b * kGroups + h;
      for (size_t r = 0; r < R; ++r) {
        const size_t row = m0 + r;
        const VF block_scale = hn::Set(df, in.scales[row * blocks + b]);
        const VI correction = hn::Set(di, kCorrection * in.sums[row * groups + g]);
        const VF scaled_sum = hn::Set(df, in.scaled_sums[row * groups + g]);
        for (size_t v = 0; v < kVectors; ++v) {
          const VI product = kCorrection != 0 && !kVnni ? hn::Sub(dot[r][v], correction) : dot[r][v];
          acc[r][v] = hn::MulAdd(hn::ConvertTo(df, product), hn::Mul(scale[v], block_scale), acc[r][v]);
          if constexpr (kPacking.minimum) acc[r][v] = hn::MulAdd(minimum[v], scaled_sum, acc[r][v]);
        }
      }
    }
  }
  for (size_t r = 0; r < std::min(R, valid_rows); ++r)
    for (size_t v = 0; v < kVectors; ++v) {
      const size_t column = v * kLanesF;
      if (column < valid_columns) StoreOutputs(df, acc[r][v], y + r * y_stride + column, valid_columns - column);
    }
}

using Int8TileFn = void (*)(const ref::Int8Rows&, size_t, size_t, const unsigned char*, size_t, float*, size_t, size_t,
                            Prefetch, unsigned char*);

// The tile of `rows` rows (1, or kTileRows) and `panels` panels (1, or the full group) taking
// its entries as `entries` says: always packed for one row and the types SharesUnpacking
// leaves out (kPacked is their only instance).
template <DType kDtype>
Int8TileFn SelectInt8Tile(size_t rows, size_t panels, Entries entries) {
  if (rows == 1)
    return panels == 1 ? &Int8Tile<kDtype, 1, 1, Entries::kPacked>
                       : &Int8Tile<kDtype, 1, kDecodePanels, Entries::kPacked>;
  if constexpr (!SharesUnpacking(kDtype)) {
    return panels == 1 ? &Int8Tile<kDtype, kTileRows, 1, Entries::kPacked>
                       : &Int8Tile<kDtype, kTileRows, kTilePanels, Entries::kPacked>;
  } else {
    if constexpr (kFirstTileUnpacks)  // elsewhere no tile unpacks for the others: none compiled
      if (entries == Entries::kUnpacking)
        return panels == 1 ? &Int8Tile<kDtype, kTileRows, 1, Entries::kUnpacking>
                           : &Int8Tile<kDtype, kTileRows, kTilePanels, Entries::kUnpacking>;
    return panels == 1 ? &Int8Tile<kDtype, kTileRows, 1, Entries::kUnpacked>
                       : &Int8Tile<kDtype, kTileRows, kTilePanels, Entries::kUnpacked>;
  }
}

Int8TileFn SelectInt8Tile(DType dtype, size_t rows, size_t panels, Entries entries) {
  return WithWeightType(dtype, [&](auto type) -> Int8TileFn {
    if constexpr (is_quantized(type())) return SelectInt8Tile<type()>(rows, panels, entries);
    return nullptr;  // never here: only quantised matrices are packed for the int8 numerics
  });
}

// The tiles of `count` panels from `panels` (each panel_bytes long, `blocks` tiles), their fields
// as f32 and their entries one per byte, to `out` (UnpackedTileBytes each, panel after panel): a
// chunk's row tiles then share one unpacking of the nibbles and planes (and one product of the
// K-quants' factors), as the exact path's share one dequantising (where kFirstTileUnpacks does
// not leave it to the first).
template <DType kDtype>
void UnpackTiles(const unsigned char* panels, size_t panel_bytes, size_t count, size_t blocks, unsigned char* out) {
  constexpr Int8Packing kPacking = int8_packing(kDtype);
  constexpr size_t kEntriesAt = int8_fields_bytes(kDtype), kUnpackedEntriesAt = UnpackedFieldsBytes(kDtype);
  constexpr size_t kMinimumsAt = int8_minimums_at(kDtype);
  const DB db;
  for (size_t p = 0; p < count; ++p)
    for (size_t b = 0; b < blocks; ++b, out += UnpackedTileBytes(kDtype)) {
      const unsigned char* tile = panels + p * panel_bytes + b * int8_tile_bytes(kDtype);
      for (size_t h = 0; h < kPacking.groups; ++h)
        for (size_t lane = 0; lane < kPanelRows; lane += kLanesF) {
          const VF minimum =
              kPacking.minimum ? LoadField<kPacking.minimum_field>(tile + kMinimumsAt, h, lane) : hn::Zero(DF());
          StoreUnpackedFields<kDtype>(LoadField<kPacking.scale_field>(tile, h, lane), minimum, out, h, lane);
        }
      for (size_t j = 0; j < 8; j += 2)
        for (size_t v = 0; v < kVectorsPerPanel; ++v) {
          VB first, second;
          LoadQuadPair<kDtype>(tile + kEntriesAt, j, v, first, second);
          hn::StoreU(first, db, reinterpret_cast<int8_t*>(out + kUnpackedEntriesAt + j * 64 + v * kVectorBytes));
          hn::StoreU(second, db, reinterpret_cast<int8_t*>(out + kUnpackedEntriesAt + (j + 1) * 64 + v * kVectorBytes));
        }
    }
}

void UnpackTiles(DType dtype, const unsigned char* panels, size_t panel_bytes, size_t count, size_t blocks,
                 unsigned char* out) {
  WithWeightType(dtype, [&](auto type) {
    if constexpr (is_quantized(type())) UnpackTiles<type()>(panels, panel_bytes, count, blocks, out);
  });
}

// ref::quantize_block lane by lane; also returns the sums of the values of each group of
// `group` inputs (32, or 16: two).
HWY_INLINE float QuantizeBlock(const float* x, int8_t* q, size_t group, int32_t* sums) {
  const DF df;
  const DI di;
  constexpr size_t kVectors = kInt8Block / kLanesF;
  VF values[kVectors];
  VI largest = hn::Zero(di);
  for (size_t i = 0; i < kVectors; ++i) {
    values[i] = hn::LoadU(df, x + i * kLanesF);
    largest = hn::Max(largest, hn::And(hn::BitCast(di, values[i]), hn::Set(di, 0x7fffffff)));
  }
  const uint32_t bits = uint32_t(hn::GetLane(hn::MaxOfLanes(di, largest)));
  const bool finite = bits < 0x7f800000u;
  const float scale = finite ? f32_from_bits(bits) / 127.0f : std::numeric_limits<float>::quiet_NaN();
  if (!finite || scale == 0.0f) {
    std::memset(q, 0, kInt8Block);
    for (size_t g = 0; g < kInt8Block / group; ++g) sums[g] = 0;
    return scale;
  }
  const VF divisor = hn::Set(df, scale), lowest = hn::Set(df, -127.0f), highest = hn::Set(df, 127.0f);
  VI rounded[kVectors];
  for (size_t i = 0; i < kVectors; ++i) {
    rounded[i] = hn::NearestInt(hn::Min(hn::Max(hn::Div(values[i], divisor), lowest), highest));
    hn::StoreU(hn::DemoteTo(hn::Rebind<int8_t, DI>(), rounded[i]), hn::Rebind<int8_t, DI>(), q + i * kLanesF);
  }
  const size_t per_group = group / kLanesF;
  for (size_t g = 0; g < kInt8Block / group; ++g) {
    VI sum = rounded[g * per_group];
    for (size_t i = 1; i < per_group; ++i) sum = hn::Add(sum, rounded[g * per_group + i]);
    sums[g] = hn::GetLane(hn::SumOfLanes(di, sum));
  }
  return scale;
}

void QuantizeRows(const float* x, size_t rows, size_t cols, size_t group, ref::Int8Rows& out, size_t padding,
                  int threads) {
  out.resize(rows, cols, group, padding);
  const auto quantize = [&](size_t begin, size_t end) {
    for (size_t m = begin; m < end; ++m)
      for (size_t b = 0; b < out.blocks(); ++b) {
        const size_t at = m * cols + b * kInt8Block, g = m * out.groups() + b * kInt8Block / group;
        const float scale = QuantizeBlock(x + at, out.values.data() + at, group, out.sums.data() + g);
        out.scales[m * out.blocks() + b] = scale;
        for (size_t i = 0; i < kInt8Block / group; ++i) out.scaled_sums[g + i] = float(out.sums[g + i]) * scale;
      }
  };
  if (rows == 1 || threads == 1) return quantize(0, rows);
  parallel_for(threads, rows, quantize);
}

// Below this many rows the inputs are rounded by the calling thread: rounding a few rows is
// shorter than handing it to the pool. A 16-row chunk's is not (Gemma 3 270M, chunk-16 prefill
// on 2 threads: 4.5% faster split than on the calling thread alone).
constexpr size_t kParallelQuantizeRows = 16;

// Every job's matmul of the same rows: the inputs rounded once per group size (32 or 16) the
// jobs' types use, and the panel groups of all jobs, one after the other, one hand-off to the
// threads (each output is computed as by a call of its own).
void MatmulsInt8(const float* x, size_t rows, std::span<const kernels::MatmulJob> jobs, int threads) {
  // Kept per calling thread, so that the buffers keep their memory from call to call; the
  // workers read the caller's (a thread_local named in the lambda would be their own).
  thread_local ref::Int8Rows rows_of_caller[2];  // by group size: 32, 16
  ref::Int8Rows* const by_group = rows_of_caller;
  const auto inputs = [by_group](const MatrixView& w) -> ref::Int8Rows& { return by_group[quant_group_size(w.dtype) == 16]; };
  const size_t tile_rows = rows == 1 ? 1 : kTileRows;
  const size_t padded = (rows + tile_rows - 1) / tile_rows * tile_rows;
  bool rounded[2] = {false, false};
  for (const kernels::MatmulJob& job : jobs) {
    const size_t group = quant_group_size(job.w.dtype);
    if (rounded[group == 16]) continue;
    rounded[group == 16] = true;
    QuantizeRows(x, rows, job.w.cols, group, inputs(job.w), padded - rows, rows < kParallelQuantizeRows ? 1 : threads);
  }
  const size_t group_panels = rows == 1 ? kDecodePanels : kTilePanels;
  const auto groups = [&](const MatrixView& w) { return (w.panels() + group_panels - 1) / group_panels; };
  size_t total = 0;
  for (const kernels::MatmulJob& job : jobs) total += groups(job.w);
  const size_t row_tiles = padded / tile_rows;
  parallel_for(threads, total, [&](size_t begin, size_t end) {
    size_t j = 0, first_group = 0;  // job j's groups start at first_group
    for (size_t g = begin; g < end; ++g) {
      while (g >= first_group + groups(jobs[j].w)) first_group += groups(jobs[j++].w);
      const MatrixView& w = jobs[j].w;
      const ref::Int8Rows& in = inputs(w);
      float* y = jobs[j].y;
      const size_t first = (g - first_group) * group_panels, panels = std::min(group_panels, w.panels() - first);
      // The row tiles share the prefetching of the next group's weights (contiguous after these;
      // none after the last), which then stream in meanwhile: without it 16-row chunks waited on
      // them (0.79 of the whole prompt's speed on one thread, 0.92 with). With one row tile
      // (decode) only where kPrefetchDecode says.
      Prefetch next = row_tiles > 1 || kPrefetchDecode ? PanelsAhead(w, first + panels, group_panels) : Prefetch{};
      const auto* packed = static_cast<const unsigned char*>(w.panel(first));
      // Per worker thread (this lambda runs on each), kept from call to call.
      thread_local std::vector<unsigned char> unpacked;
      const bool shared = tile_rows > 1 && SharesUnpacking(w.dtype);
      const size_t unpacked_panel_bytes = w.cols / kInt8Block * UnpackedTileBytes(w.dtype);
      if (shared) {
        unpacked.resize(std::max(unpacked.size(), panels * unpacked_panel_bytes));
        if (!kFirstTileUnpacks)
          UnpackTiles(w.dtype, packed, w.panel_bytes(), panels, w.cols / kInt8Block, unpacked.data());
      }
      for (size_t m0 = 0; m0 < rows; m0 += tile_rows) {
        float* out = y + m0 * w.rows;
        const Prefetch prefetch = next.share(row_tiles - m0 / tile_rows);
        const Entries entries = !shared                         ? Entries::kPacked
                                : kFirstTileUnpacks && m0 == 0 ? Entries::kUnpacking
                                                               : Entries::kUnpacked;
        const unsigned char* tiles = entries == Entries::kUnpacked ? unpacked.data() : packed;
        const size_t panel_bytes = entries == Entries::kUnpacked ? unpacked_panel_bytes : w.panel_bytes();
        if (panels == group_panels) {
          SelectInt8Tile(w.dtype, tile_rows, panels, entries)(
              in, m0, rows - m0, tiles, panel_bytes, out + first * kPanelRows, w.rows,
              std::min(panels * kPanelRows, w.rows - first * kPanelRows), prefetch, unpacked.data());
          continue;
        }
        for (size_t p = first; p < first + panels; ++p)
          SelectInt8Tile(w.dtype, tile_rows, 1, entries)(
              in, m0, rows - m0, tiles + (p - first) * panel_bytes, panel_bytes, out + p * kPanelRows, w.rows,
              std::min(kPanelRows, w.rows - p * kPanelRows), Prefetch{},
              shared ? unpacked.data() + (p - first) * unpacked_panel_bytes : nullptr);
      }
    }
  });
}

#else
void QuantizeRows(const float* x, size_t rows, size_t cols, size_t group, ref::Int8Rows& out, size_t padding, int) {
  ref::quantize_rows(x, rows, cols, group, out);
  out.resize(rows, cols, group, padding);
}
void MatmulsInt8(const float* x, size_t rows, std::span<const kernels::MatmulJob> jobs, int threads) {
  for (const kernels::MatmulJob& job : jobs) ref::matmul_int8(x, rows, job.w, job.y, threads);
}
#endif  // DITTO_SIMD_HAS_FMA

}  // namespace ditto::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ditto::kernels {

HWY_EXPORT(QuantizeRows);
HWY_EXPORT(MatmulsInt8);

void quantize_rows(const float* x, size_t rows, size_t cols, size_t group, ref::Int8Rows& out, size_t padding,
                   int threads) {
  HWY_DYNAMIC_DISPATCH(QuantizeRows)(x, rows, cols, group, out, padding, threads);
}

void matmuls_int8(const float* x, size_t rows, std::span<const MatmulJob> jobs, int threads) {
  HWY_DYNAMIC_DISPATCH(MatmulsInt8)(x, rows, jobs, threads);
}

}  // namespace ditto::kernels
#endif
