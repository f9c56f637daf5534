// SIMD matmul over panel-packed weights (src/tensor/matrix.h): each output is the fma chain
// over k of the reference, vectorised across the 16 outputs of a panel.
#include <algorithm>
#include <atomic>
#include <array>
#include <span>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/ref/kernels.h"
#include "kernels/thread_pool.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/matmul.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/simd/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ditto::HWY_NAMESPACE {
#if DITTO_SIMD_HAS_FMA

constexpr size_t kLanesF = hn::MaxLanes(DF());
constexpr size_t kVectorsPerPanel = kPanelRows / kLanesF;
// Register tile: rows x panels accumulators (24 of 32 zmm on AVX-512, 12 of 16 ymm on AVX2).
constexpr size_t kTileRows = kLanesF == 16 ? 8 : 6;
constexpr size_t kTilePanels = kLanesF == 16 ? 3 : 1;
// Decode (one row) runs tiles of this many panels: one fma chain per vector, and with AVX2's 2
// (one panel) the chains' latency, not the fma units, bounded it; 8 chains cover it.
constexpr size_t kDecodePanels = kLanesF == 16 ? kTilePanels : 4;
// Inputs per block of dequantised weights: a group of panels of them fills 400 KB, in L2.
constexpr size_t kBlockK = 2048;
// How far ahead of its reading a tile not asked to prefetch the next group (decode) asks for each
// panel's dense weights (Tile).
constexpr size_t kDecodeAheadBytes = 2048;
// Chunks of more rows than a row tile's, up to kChunkRows, with quantised weights run ChunkTile
// where kChunkTiles says: with AVX-512 (AVX2's 16 registers do not hold 16 accumulators).
constexpr size_t kChunkRows = 16;
constexpr bool kChunkTiles = kLanesF == 16;

using DI32 = hn::Rebind<int32_t, DF>;
using VI32 = hn::Vec<DI32>;

// Reads the outputs n0 .. n0+L-1 of one row, of which only `valid` exist.
HWY_INLINE VF LoadOutputs(DF d, const float* y, size_t valid) {
  if (valid >= kLanesF) return hn::LoadU(d, y);
  HWY_ALIGN float lanes[kLanesF] = {};
  std::copy(y, y + valid, lanes);
  return hn::Load(d, lanes);
}

// Where a tile finds its weights: vector v of panel p at input k lies at element
// k * k_stride + p * panel_stride + v * L of `data`, stored as kDtype. Quantised panels count
// in ExactTiles instead: panel p's tile of inputs G*b .. G*b+G-1 is tile p * panel_stride + b.
struct PanelSource {
  const void* data;
  size_t panel_stride, k_stride;
};

// R rows x P panels over `inputs` inputs. Continues the chains stored in y unless `first`.
template <size_t R, size_t P, DType kDtype>
HWY_NOINLINE void Tile(const float* x, size_t x_stride, PanelSource weights, size_t inputs, float* y, size_t y_stride,
                       size_t valid_columns, bool first, Prefetch prefetch) {
  const DF d;
  constexpr size_t kVectors = P * kVectorsPerPanel;
  VF acc[R][kVectors];
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < kVectors; ++v) {
      const size_t column = v * kLanesF;
      const size_t valid = column < valid_columns ? valid_columns - column : 0;
      acc[r][v] = first ? hn::Zero(d) : LoadOutputs(d, y + r * y_stride + column, valid);
    }
  const auto* base = static_cast<const unsigned char*>(weights.data);
  constexpr size_t kElement = kDtype == DType::F32 ? 4 : 2;
  const auto step = [&](size_t k) HWY_ATTR {
    VF w[kVectors];
    for (size_t v = 0; v < kVectors; ++v) {
      const size_t element = k * weights.k_stride + (v / kVectorsPerPanel) * weights.panel_stride +
                             (v % kVectorsPerPanel) * kLanesF;
      w[v] = LoadWidened(d, kDtype, base + element * kElement);
    }
    for (size_t r = 0; r < R; ++r) {
      const VF xr = hn::Set(d, x[r * x_stride + k]);
      for (size_t v = 0; v < kVectors; ++v) acc[r][v] = hn::MulAdd(xr, w[v], acc[r][v]);
    }
  };
  // The prefetching spread evenly over the inputs, in loops rather than a branch per input: GCC
  // then keeps every accumulator in a register.
  const size_t lines = std::min(prefetch.lines, inputs), stride = lines == 0 ? 0 : inputs / lines;
  size_t k = 0;
  for (size_t line = 0; line < lines; ++line) {
    hwy::Prefetch(prefetch.start + line * 64);
    for (const size_t end = k + stride; k < end; ++k) step(k);
  }
  if (prefetch.lines == 0) {
    // Not asked to prefetch the next group (decode; chunks of two row tiles, DirectGroup), the rows
    // read each panel's weights at the speed of memory: they ask for each panel's line
    // kDecodeAheadBytes ahead, into L2, as they reach a new line.
    // Qwen3-0.6B shapes in f16, tg32 on a 2-core Xeon, medians of 4 interleaved runs: one sequence
    // 19.6-20.8 -> 22.3-23.2 t/s (1 KB to 4 KB ahead alike, 8 KB less), four together 71.0 -> 81.8.
    constexpr size_t kStepBytes = kElement * kPanelRows;  // of one panel
    constexpr size_t kStepsPerLine = 64 / kStepBytes, kStepsAhead = kDecodeAheadBytes / kStepBytes;
    for (; k < inputs; ++k) {
      if (k % kStepsPerLine == 0)
        for (size_t p = 0; p < P; ++p)
          PrefetchIntoL2(base + ((k + kStepsAhead) * weights.k_stride + p * weights.panel_stride) * kElement);
      step(k);
    }
  }
  for (; k < inputs; ++k) step(k);
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < kVectors; ++v) {
      const size_t column = v * kLanesF;
      if (column < valid_columns) StoreOutputs(d, acc[r][v], y + r * y_stride + column, valid_columns - column);
    }
}

// The entries q[0 .. L-1] of a quantised tile as dequantize() computes them, lane by lane:
// the integer entry converted to f32, times the scale, plus the tile's minimum term (+-minimum,
// exact_minimum_term). The product is exact (docs/numerics-quant.md: at most 23 significant
// bits), so one fma with the term rounds where the reference's product-then-sum rounds and gives
// its value: one operation fewer per weight. A NaN term is the reference's NaN too; where the
// scale is infinite or NaN as well, both give NaN, perhaps of another payload, as NaNs meeting in
// any fma chain may.
HWY_INLINE VF DequantizeLanes(DF d, DType dtype, VI32 entries, VF scale, VF minimum_term) {
  const VF entry = hn::ConvertTo(d, entries);
  if (quant_minimum(dtype) == QuantMinimum::None) return hn::Mul(scale, entry);
  return hn::MulAdd(scale, entry, minimum_term);
}

// Lanes lane0 .. lane0 + L - 1 of a tile's scales and minimum terms, widened to f32 exactly (no
// terms for the types without a minimum: DequantizeLanes adds none).
template <DType kDtype>
HWY_INLINE void LoadTileFields(DF d, const ExactTile<kDtype>& tile, size_t lane0, VF& scale, VF& minimum_term) {
  using Tile = ExactTile<kDtype>;
  scale = LoadWidened(d, Tile::kFieldType, tile.scales() + lane0);
  if constexpr (Tile::kMinimum)
    minimum_term = LoadWidened(d, Tile::kFieldType, tile.minimum_terms() + lane0);
  else
    minimum_term = hn::Zero(d);
}

// A tile's inputs are read in pairs, i and i + 1 (i even), in order. What the pair's entries of
// lanes lane0 .. lane0 + L - 1 need loaded once: with nibbles (exact_nibbles) their bytes,
// widened to 32 bits; one entry per byte, nothing (EntriesOf loads each input's).
template <DType kDtype>
HWY_INLINE VI32 LoadEntryPair(const ExactTile<kDtype>& tile, size_t i, size_t lane0) {
  const DI32 di;
  if constexpr (exact_nibbles(kDtype)) {
    const hn::Rebind<uint8_t, DF> du8;
    return hn::BitCast(di, hn::PromoteTo(hn::Rebind<uint32_t, DF>(), hn::LoadU(du8, tile.entries[i / 2] + lane0)));
  } else {
    return hn::Zero(di);
  }
}

// The entries of input i + kSecond of the pair that LoadEntryPair(tile, i, lane0) gave, as
// dequantize() takes them: a nibble less the type's offset, or a byte.
template <DType kDtype, bool kSecond>
HWY_INLINE VI32 EntriesOf(const ExactTile<kDtype>& tile, size_t i, size_t lane0, VI32 pair) {
  const DI32 di;
  if constexpr (exact_nibbles(kDtype)) {
    const VI32 nibble = kSecond ? hn::ShiftRight<4>(pair) : hn::And(pair, hn::Set(di, 0x0f));
    constexpr int kOffset = int8_packing(kDtype).offset;
    return kOffset == 0 ? nibble : hn::Sub(nibble, hn::Set(di, kOffset));
  } else {
    return hn::PromoteTo(di, hn::LoadU(hn::Rebind<int8_t, DF>(), tile.entries[i + kSecond] + lane0));
  }
}

// Inputs i and i + 1 (i even) of a tile's lanes lane0 .. lane0 + L - 1, dequantised. Callers then
// use the first, then the second: written out, not through a lambda taking which (GCC then stored
// ChunkTile's accumulators to the stack at every pair: exact Gemma 3 270M in 16-token chunks 14%
// slower); both dequantised before either is used (with AVX2 the decode and dequantising tiles
// ran 3-6% slower dequantising the second after the first's fmas).
template <DType kDtype>
HWY_INLINE void DequantizePair(DF d, const ExactTile<kDtype>& tile, size_t i, size_t lane0, VF scale, VF minimum_term,
                               VF& first, VF& second) {
  const VI32 pair = LoadEntryPair<kDtype>(tile, i, lane0);
  first = DequantizeLanes(d, kDtype, EntriesOf<kDtype, false>(tile, i, lane0, pair), scale, minimum_term);
  second = DequantizeLanes(d, kDtype, EntriesOf<kDtype, true>(tile, i, lane0, pair), scale, minimum_term);
}

// The lines of a tile that its reader asks for ahead, one with each pair of inputs (from the
// tile's start: tiles of the types without a minimum need not fill whole lines, and the next
// tile's reader asks for the rest).
template <DType kDtype>
constexpr size_t TileLines() {
  constexpr size_t kLines = (sizeof(ExactTile<kDtype>) + 63) / 64;
  static_assert(kLines <= quant_group_size(kDtype) / 2, "a line per pair of inputs at most");
  return kLines;
}

// Tile() for quantised weights and few rows: each input's entries are dequantised in registers
// with the scales of their block. Always starts the chains (DirectGroup runs whole rows).
// It does not prefetch the next group's weights as Int8Tile does (16-row chunks ran 1.45x slower
// when they came here). Decode waited for its weights instead: the tile asks for each panel's
// tile kDecodeAheadTiles ahead, into L2, a line per input over a tile's first inputs. Exact decode
// of one row on Zen 4, two threads, medians of 4 interleaved runs: SmolLM2 Q4_1 104 -> 122 t/s
// with AVX-512, Gemma 3 270M 65 -> 76 with AVX-512 and 59 -> 68 with AVX2; into L1 AVX-512's
// decode was 9% slower (AVX2's 5-8% slower than into L2), 2 or 8 tiles ahead gained less. Then
// for the several rows of sequences decoding together too: 4 sequences on a Xeon, medians of 3
// interleaved runs, SmolLM2 367 -> 430 t/s, Gemma 3 270M 209 -> 230 (int8's 4-row tiles measured
// the same with it). Kept apart from Tile(): with both loops in one function GCC stored every
// accumulator to the stack on every input.
// With kDequantizes (DequantizingTile), it also stores the dequantised weights of its one panel
// to `block`, k-major (BlockedGroup's), and continues the chains stored in y unless `first`.
template <size_t R, size_t P, DType kDtype, bool kDequantizes>
HWY_INLINE void QuantizedRows(const float* x, size_t x_stride, PanelSource weights, size_t inputs, float* y,
                              size_t y_stride, size_t valid_columns, bool first, float* block) {
  const DF d;
  constexpr size_t kVectors = P * kVectorsPerPanel;
  constexpr size_t G = quant_group_size(kDtype);
  static_assert(!kDequantizes || P == 1, "a dequantising tile stores one panel");
  VF acc[R][kVectors];
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < kVectors; ++v) {
      const size_t column = v * kLanesF;
      const size_t valid = column < valid_columns ? valid_columns - column : 0;
      acc[r][v] = !kDequantizes || first ? hn::Zero(d) : LoadOutputs(d, y + r * y_stride + column, valid);
    }
  const auto* tiles = static_cast<const ExactTile<kDtype>*>(weights.data);
  const size_t blocks = inputs / G;
  for (size_t b = 0; b < blocks; ++b) {
    const ExactTile<kDtype>* tile[kVectors];
    VF scale[kVectors], minimum_term[kVectors];
    for (size_t v = 0; v < kVectors; ++v) {
      tile[v] = &tiles[(v / kVectorsPerPanel) * weights.panel_stride + b];
      LoadTileFields<kDtype>(d, *tile[v], (v % kVectorsPerPanel) * kLanesF, scale[v], minimum_term[v]);
    }
    for (size_t i = 0; i < G; i += 2) {
      if (i / 2 < TileLines<kDtype>() && b + kDecodeAheadTiles < blocks)
        for (size_t p = 0; p < P; ++p)
          PrefetchIntoL2(reinterpret_cast<const char*>(tile[p * kVectorsPerPanel] + kDecodeAheadTiles) + i / 2 * 64);
      VF w[2][kVectors];
      for (size_t v = 0; v < kVectors; ++v)
        DequantizePair<kDtype>(d, *tile[v], i, (v % kVectorsPerPanel) * kLanesF, scale[v], minimum_term[v], w[0][v],
                               w[1][v]);
      for (size_t s = 0; s < 2; ++s) {
        const size_t k = b * G + i + s;
        for (size_t v = 0; v < kVectors; ++v)
          if constexpr (kDequantizes) hn::Store(w[s][v], d, block + k * kPanelRows + v * kLanesF);
        for (size_t r = 0; r < R; ++r) {
          const VF xr = hn::Set(d, x[r * x_stride + k]);
          for (size_t v = 0; v < kVectors; ++v) acc[r][v] = hn::MulAdd(xr, w[s][v], acc[r][v]);
        }
      }
    }
  }
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < kVectors; ++v) {
      const size_t column = v * kLanesF;
      if (column < valid_columns) StoreOutputs(d, acc[r][v], y + r * y_stride + column, valid_columns - column);
    }
}

template <size_t R, size_t P, DType kDtype>
HWY_NOINLINE void QuantizedTile(const float* x, size_t x_stride, PanelSource weights, size_t inputs, float* y,
                                size_t y_stride, size_t valid_columns, bool, Prefetch) {
  QuantizedRows<R, P, kDtype, false>(x, x_stride, weights, inputs, y, y_stride, valid_columns, true, nullptr);
}

template <size_t R, DType kDtype>
HWY_NOINLINE void DequantizingTile(const float* x, size_t x_stride, PanelSource weights, size_t inputs, float* y,
                                   size_t y_stride, size_t valid_columns, bool first, float* block) {
  QuantizedRows<R, 1, kDtype, true>(x, x_stride, weights, inputs, y, y_stride, valid_columns, first, block);
}

using TileFn = void (*)(const float*, size_t, PanelSource, size_t, float*, size_t, size_t, bool, Prefetch);

template <size_t R, size_t P, DType kDtype>
constexpr TileFn TileFor() {
  if constexpr (is_quantized(kDtype)) return &QuantizedTile<R, P, kDtype>;
  return &Tile<R, P, kDtype>;
}

template <size_t P, DType kDtype, size_t... R>
constexpr std::array<TileFn, kTileRows> TilesByRows(std::index_sequence<R...>) {
  return {{TileFor<R + 1, P, kDtype>()...}};
}

template <DType kDtype, size_t... P>
constexpr std::array<std::array<TileFn, kTileRows>, sizeof...(P)> TilesByPanels(std::index_sequence<P...>) {
  return {{TilesByRows<P + 1, kDtype>(std::make_index_sequence<kTileRows>())...}};
}

template <DType kDtype>
TileFn SelectTile(size_t rows, size_t panels) {
  if (rows == 1 && panels == kDecodePanels) return TileFor<1, kDecodePanels, kDtype>();
  static constexpr auto kTiles = TilesByPanels<kDtype>(std::make_index_sequence<kTilePanels>());
  return kTiles[panels - 1][rows - 1];
}

TileFn SelectTile(DType dtype, size_t rows, size_t panels) {
  return WithWeightType(dtype, [&](auto type) { return SelectTile<type()>(rows, panels); });
}

// The panels of one thread's work: `size` at a time (kTilePanels, or kDecodePanels for one
// row), the last group maybe fewer.
size_t GroupPanels(size_t rows) { return rows == 1 ? kDecodePanels : kTilePanels; }
struct PanelGroup {
  size_t first_panel, panels, n0, valid_columns;
  PanelGroup(const MatrixView& w, size_t g, size_t size = kTilePanels)
      : first_panel(g * size),
        panels(std::min(size, w.panels() - first_panel)),
        n0(first_panel * kPanelRows),
        valid_columns(std::min(panels * kPanelRows, w.rows - n0)) {}
};

// The weights of the group after `group` (contiguous after its panels, none after the last): the
// tiles of this group prefetch them, one line per input, so that they stream in meanwhile.
Prefetch NextGroup(const MatrixView& w, const PanelGroup& group) {
  return PanelsAhead(w, group.first_panel + group.panels, kTilePanels);
}

// Dense weights, and quantised ones for few rows: every tile of group `g` reads the packed
// weights itself, widening 16-bit ones in registers (free beside the fmas, and half the bytes of
// a widened copy).
void DirectGroup(const float* x, size_t rows, const MatrixView& w, float* y, size_t g) {
  const PanelGroup group(w, g, GroupPanels(rows));
  // A group of kDecodePanels runs as one tile; fewer panels than that, one panel at a time where
  // kTilePanels is fewer.
  const size_t tile_panels = group.panels <= kTilePanels || group.panels == kDecodePanels ? group.panels : 1;
  // Only where a group has more than two row tiles: with one (decode), prefetching made decode
  // 16% slower, most likely by evicting the group's own lines from L1, and with two (16-row chunks
  // with AVX-512) the tiles wait less asking for their own panels' lines ahead, into L2, as Tile
  // does without it (Qwen3-0.6B shapes on a Xeon, pp512 in 16-token chunks, medians of interleaved
  // runs: f16 202.8 -> 210.4 t/s, bf16 199.5 -> 208.8; 32-token chunks and whole prompts the same).
  Prefetch next = rows > 2 * kTileRows ? NextGroup(w, group) : Prefetch{};
  for (size_t m0 = 0; m0 < rows; m0 += kTileRows) {
    const size_t tile_rows = std::min(kTileRows, rows - m0);
    const Prefetch prefetch = next.share((rows - m0 + kTileRows - 1) / kTileRows);
    for (size_t p = 0; p < group.panels; p += tile_panels) {
      const size_t panel = group.first_panel + p, n0 = panel * kPanelRows;
      const PanelSource weights = is_quantized(w.dtype)
                                      ? PanelSource{w.panel(panel), w.cols / quant_group_size(w.dtype), 0}
                                      : PanelSource{w.panel(panel), w.cols * kPanelRows, kPanelRows};
      SelectTile(w.dtype, tile_rows, tile_panels)(x + m0 * w.cols, w.cols, weights, w.cols, y + m0 * w.rows + n0, w.rows,
                                                  std::min(tile_panels * kPanelRows, w.rows - n0), true, prefetch);
    }
  }
}

// Quantised weights: dequantises inputs k0 .. k0+block_k (whole groups of G) of panel `panel`
// into position p of the k-major f32 block, lane for lane the arithmetic of dequantize().
static_assert(kBlockK % kMaxQuantBlock == 0, "blocks of inputs hold whole quantised blocks");
template <DType kDtype>
void DequantizePanel(const MatrixView& w, size_t panel, size_t k0, size_t block_k, size_t p, size_t panels,
                     float* block) {
  constexpr size_t G = quant_group_size(kDtype);
  const DF d;
  for (size_t b = k0 / G; b < (k0 + block_k) / G; ++b) {
    const ExactTile<kDtype>& tile = w.tile<kDtype>(panel, b);
    VF scale[kVectorsPerPanel], minimum_term[kVectorsPerPanel];
    for (size_t v = 0; v < kVectorsPerPanel; ++v) LoadTileFields<kDtype>(d, tile, v * kLanesF, scale[v], minimum_term[v]);
    for (size_t i = 0; i < G; i += 2)
      for (size_t v = 0; v < kVectorsPerPanel; ++v) {
        VF first, second;
        DequantizePair<kDtype>(d, tile, i, v * kLanesF, scale[v], minimum_term[v], first, second);
        float* out = block + ((b * G + i - k0) * panels + p) * kPanelRows + v * kLanesF;
        hn::Store(first, d, out);
        hn::Store(second, d, out + panels * kPanelRows);
      }
  }
}

// Rows up to which a block's last row tile, where it has no more, runs first and dequantises the
// block for the others as it goes (DequantizingTile), in place of DequantizePanel's pass: with
// AVX2, whose 16 registers hold such a tile of one panel (4 rows: 8 chains, 2 weights, their
// scales and minimums, an input). There its products run beside the dequantising and the wait for
// the weights, which stalled the pass with nothing else to do (exact pp512 in 16-token chunks on
// a 2-core Xeon, medians of 5 interleaved runs: SmolLM2 592 -> 633 t/s, Gemma 3 270M 660 -> 718;
// whole prompts, whose last tile of 2 rows now dequantises, the same). AVX-512 runs chunks of up
// to 16 rows in ChunkTile.
constexpr size_t kDequantizingRows = kLanesF == 8 ? 4 : 0;

// DequantizingTile of `rows` rows (1 .. kDequantizingRows) of x over inputs k0 .. k0 + block_k - 1
// of the quantised panel `panel`.
void RunDequantizingTile(const MatrixView& w, size_t panel, size_t k0, size_t block_k, size_t rows, const float* x,
                         float* y, size_t valid_columns, float* block) {
  WithWeightType(w.dtype, [&](auto type) {
    if constexpr (is_quantized(type()) && kDequantizingRows > 0) {
      constexpr size_t G = quant_group_size(type());
      using Fn = void (*)(const float*, size_t, PanelSource, size_t, float*, size_t, size_t, bool, float*);
      constexpr Fn kTiles[] = {&DequantizingTile<1, type()>, &DequantizingTile<2, type()>,
                               &DequantizingTile<3, type()>, &DequantizingTile<4, type()>};
      static_assert(std::size(kTiles) == kDequantizingRows);
      const PanelSource tiles{&w.tile<type()>(panel, k0 / G), w.cols / G, 0};
      kTiles[rows - 1](x + k0, w.cols, tiles, block_k, y, w.rows, valid_columns, k0 == 0, block);
    }
  });
}

// Quantised weights: dequantise a block of group `g`'s weights to f32 once, k-major across the
// group's panels, then run every row tile over it. The chains continue across blocks in y.
void BlockedGroup(const float* x, size_t rows, const MatrixView& w, float* y, size_t g) {
  // Kept per thread: a fresh 400 KB buffer per call cost a page fault and zeroing per page.
  thread_local const auto block = hwy::AllocateAligned<float>(kBlockK * kTilePanels * kPanelRows);
  const PanelGroup group(w, g);
  const PanelSource widened{block.get(), kPanelRows, group.panels * kPanelRows};
  Prefetch next = NextGroup(w, group);
  const size_t last_rows = rows % kTileRows;  // of the last row tile, if it is not a full one
  const bool dequantizing = last_rows != 0 && last_rows <= kDequantizingRows && group.panels == 1;
  // The row tiles that share the prefetching of the next group (not a DequantizingTile).
  const size_t full_tiles = rows / kTileRows;
  const size_t row_tiles = dequantizing ? full_tiles : (rows + kTileRows - 1) / kTileRows;
  for (size_t k0 = 0; k0 < w.cols; k0 += kBlockK) {
    const size_t block_k = std::min(kBlockK, w.cols - k0);
    if (dequantizing) {
      const size_t m0 = rows - last_rows;
      RunDequantizingTile(w, group.first_panel, k0, block_k, last_rows, x + m0 * w.cols, y + m0 * w.rows + group.n0,
                          group.valid_columns, block.get());
    } else {
      WithWeightType(w.dtype, [&](auto type) {
        if constexpr (is_quantized(type()))
          for (size_t p = 0; p < group.panels; ++p)
            DequantizePanel<type()>(w, group.first_panel + p, k0, block_k, p, group.panels, block.get());
      });
    }
    for (size_t m0 = 0; m0 < (dequantizing ? full_tiles * kTileRows : rows); m0 += kTileRows) {
      const size_t tile_rows = std::min(kTileRows, rows - m0);
      const size_t tiles_left = (w.cols - k0 - 1) / kBlockK * row_tiles + row_tiles - m0 / kTileRows;
      const Prefetch prefetch = next.share(tiles_left);
      SelectTile(DType::F32, tile_rows, group.panels)(x + m0 * w.cols + k0, w.cols, widened, block_k,
                                                      y + m0 * w.rows + group.n0, w.rows, group.valid_columns, k0 == 0,
                                                      prefetch);
    }
  }
}

// x's rows (at most kChunkRows), k-major: input k of row r to out[k * kChunkRows + r], the rows
// past `rows` zero. cols is a multiple of kLanesF (whole blocks of quantised inputs).
void PackChunkRows(const float* x, size_t rows, size_t cols, std::vector<float>& out) {
  const DF d;
  // Grown only: a resize down and up again would zero what it grows back.
  if (out.size() < cols * kChunkRows) out.resize(cols * kChunkRows);
  for (size_t r0 = 0; r0 < kChunkRows; r0 += kLanesF)
    for (size_t k0 = 0; k0 < cols; k0 += kLanesF) {
      VF m[kLanesF];
      for (size_t r = 0; r < kLanesF; ++r) m[r] = r0 + r < rows ? hn::LoadU(d, x + (r0 + r) * cols + k0) : hn::Zero(d);
      Transpose(d, m);
      for (size_t i = 0; i < kLanesF; ++i) hn::StoreU(m[i], d, out.data() + (k0 + i) * kChunkRows + r0);
    }
}

// The kChunkRows rows of a chunk (packed by PackChunkRows, of which valid_rows exist) x panel
// `panel` of quantised w (one vector with AVX-512): every weight is dequantised once, in
// registers, for all the rows, where BlockedGroup stores a block of them and its row tiles read
// it back from L2, and DirectGroup's each dequantise them again; the packed inputs put an input
// of every row in one line (read from 16 rows of x, their pointers did not fit in the registers).
// Exact Gemma 3 270M Q4_K_M, pp512 in 16-token chunks on a 2-core Xeon, medians of 5 interleaved
// runs: BlockedGroup 780 t/s, ChunkTile 822; with the prefetching below 892.
// The tile asks for the weights kDecodeAheadTiles tiles ahead, into L2, across the ends of
// panels: a group's panels, and the next group's, lie one after the other (not past the matrix).
template <DType kDtype>
HWY_NOINLINE void ChunkTile(const float* packed, size_t valid_rows, const MatrixView& w, size_t panel, float* y) {
  constexpr size_t G = quant_group_size(kDtype);
  static_assert(!kChunkTiles || kVectorsPerPanel == 1, "a chunk tile is one vector of outputs wide");
  const DF d;
  VF acc[kChunkRows];
  for (VF& a : acc) a = hn::Zero(d);
  const auto* matrix_end = static_cast<const char*>(w.panel(w.panels()));
  const size_t blocks = w.cols / G;
  for (size_t b = 0; b < blocks; ++b) {
    const ExactTile<kDtype>& tile = w.tile<kDtype>(panel, b);
    VF scale, minimum_term;
    LoadTileFields<kDtype>(d, tile, 0, scale, minimum_term);
    const auto* ahead = reinterpret_cast<const char*>(&tile + kDecodeAheadTiles);
    for (size_t i = 0; i < G; i += 2) {
      if (i / 2 < TileLines<kDtype>() && ahead + i / 2 * 64 < matrix_end) PrefetchIntoL2(ahead + i / 2 * 64);
      VF weight[2];
      DequantizePair<kDtype>(d, tile, i, 0, scale, minimum_term, weight[0], weight[1]);
      for (size_t s = 0; s < 2; ++s) {
        const float* inputs = packed + (b * G + i + s) * kChunkRows;
        for (size_t r = 0; r < kChunkRows; ++r) acc[r] = hn::MulAdd(hn::Set(d, inputs[r]), weight[s], acc[r]);
      }
    }
  }
  const size_t n0 = panel * kPanelRows, valid_columns = std::min(kPanelRows, w.rows - n0);
  for (size_t r = 0; r < valid_rows; ++r) StoreOutputs(d, acc[r], y + r * w.rows + n0, valid_columns);
}

// ChunkTile over each panel of group `g`.
void ChunkGroup(const float* packed, size_t rows, const MatrixView& w, float* y, size_t g) {
  const PanelGroup group(w, g);
  WithWeightType(w.dtype, [&](auto type) {
    if constexpr (kChunkTiles && is_quantized(type()))
      for (size_t p = 0; p < group.panels; ++p) ChunkTile<type()>(packed, rows, w, group.first_panel + p, y);
  });
}

// Every job's matmul of the same rows: the panel groups of all of them, one after the other,
// are one hand-off to the threads (a 16-row chunk of a small model is short enough that a
// hand-off per matrix costs it; each output is computed as by a call of its own).
void Matmuls(const float* x, size_t rows, std::span<const kernels::MatmulJob> jobs, int threads) {
  const auto groups = [rows](const MatrixView& w) { return (w.panels() + GroupPanels(rows) - 1) / GroupPanels(rows); };
  size_t total = 0;
  for (const kernels::MatmulJob& job : jobs) total += groups(job.w);
  const auto quantised = [](const kernels::MatmulJob& job) { return is_quantized(job.w.dtype); };
  const bool chunk = kChunkTiles && rows > kTileRows && rows <= kChunkRows &&
                     std::any_of(jobs.begin(), jobs.end(), quantised);
  // A chunk's rows are packed by every thread that takes part, for itself, as it starts: packed
  // once by the calling thread, the other waited, then read them from the caller's cache (exact
  // SmolLM2 in 16-token chunks on a 2-core Xeon, medians of 7 interleaved runs: 800 -> 842 t/s;
  // Gemma 3 270M 895 -> 903). Each thread's buffer keeps its memory from call to call.
  static std::atomic<uint64_t> calls{0};
  const uint64_t call = ++calls;
  parallel_for(threads, total, [&](size_t begin, size_t end) {
    thread_local std::vector<float> packed;
    thread_local uint64_t packed_for = 0;  // the call whose rows `packed` holds
    if (chunk && packed_for != call) {
      PackChunkRows(x, rows, jobs.front().w.cols, packed);
      packed_for = call;
    }
    size_t j = 0, first = 0;  // job j's groups start at `first`
    for (size_t g = begin; g < end; ++g) {
      while (g >= first + groups(jobs[j].w)) first += groups(jobs[j++].w);
      const MatrixView& w = jobs[j].w;
      // Quantised weights of rows that one row tile holds (decode, the smallest chunks) are
      // dequantised in registers by the tile; with more rows, a block is dequantised once and
      // shared by the row tiles (measured on Zen 4, exact SmolLM2 in chunks of 16: AVX2 1.15x
      // faster than three tiles each dequantising, AVX-512 the same; 1.2x from 64 rows). Chunks
      // of up to kChunkRows rows run ChunkTile where kChunkTiles says.
      if (is_quantized(w.dtype) && chunk) ChunkGroup(packed.data(), rows, w, jobs[j].y, g - first);
      else (is_quantized(w.dtype) && rows > kTileRows ? BlockedGroup : DirectGroup)(x, rows, w, jobs[j].y, g - first);
    }
  });
}

#else
void Matmuls(const float* x, size_t rows, std::span<const kernels::MatmulJob> jobs, int threads) {
  for (const kernels::MatmulJob& job : jobs) ref::matmul(x, rows, job.w, job.y, threads);
}
#endif  // DITTO_SIMD_HAS_FMA

}  // namespace ditto::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ditto::kernels {

HWY_EXPORT(Matmuls);

void matmuls(const float* x, size_t rows, std::span<const MatmulJob> jobs, int threads) {
  const auto int8 = [](const MatmulJob& job) { return job.w.numerics == Numerics::Int8; };
  if (std::all_of(jobs.begin(), jobs.end(), int8)) return matmuls_int8(x, rows, jobs, threads);
  if (std::none_of(jobs.begin(), jobs.end(), int8)) return HWY_DYNAMIC_DISPATCH(Matmuls)(x, rows, jobs, threads);
  for (const MatmulJob& job : jobs) matmul(x, rows, job.w, job.y, threads);  // both numerics: one at a time
}

void matmul(const float* x, size_t rows, const MatrixView& w, float* y, int threads) {
  const MatmulJob job{w, y};
  matmuls(x, rows, std::span(&job, 1), threads);
}

}  // namespace ditto::kernels
#endif
