// SIMD matmul over panel-packed weights (src/tensor/matrix.h): each output is the fma chain
// over k of the reference, vectorised across the 16 outputs of a panel.
#include <algorithm>
#include <array>
#include <utility>

#include "kernels/kernels.h"
#include "kernels/ref/kernels.h"
#include "kernels/thread_pool.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/matmul.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "kernels/simd/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ditto::HWY_NAMESPACE {
#if DITTO_SIMD_HAS_FMA

constexpr size_t kLanesF = hn::MaxLanes(DF());
constexpr size_t kVectorsPerPanel = kPanelRows / kLanesF;
// Register tile of the prefill kernel: rows x panels accumulators (24 of 32 zmm on AVX-512).
constexpr size_t kTileRows = kLanesF == 16 ? 8 : 4;
constexpr size_t kTilePanels = kLanesF == 16 ? 3 : 1;
// Inputs per block whose weights are widened once to f32 and reused by every row tile.
constexpr size_t kBlockK = 256;

// Reads or writes the outputs n0 .. n0+L-1 of one row, of which only `valid` exist.
HWY_INLINE VF LoadOutputs(DF d, const float* y, size_t valid) {
  if (valid >= kLanesF) return hn::LoadU(d, y);
  HWY_ALIGN float lanes[kLanesF] = {};
  std::copy(y, y + valid, lanes);
  return hn::Load(d, lanes);
}
HWY_INLINE void StoreOutputs(DF d, VF v, float* y, size_t valid) {
  if (valid >= kLanesF) return hn::StoreU(v, d, y);
  HWY_ALIGN float lanes[kLanesF];
  hn::Store(v, d, lanes);
  std::copy(lanes, lanes + valid, y);
}

// R rows x P panels over `block_k` inputs of f32 weights in `block` (k-major, P*16 per k).
// Continues the chains stored in y unless `first`.
template <size_t R, size_t P>
HWY_NOINLINE void Tile(const float* x, size_t x_stride, const float* block, size_t block_k, float* y,
                       size_t y_stride, size_t valid_columns, bool first) {
  const DF d;
  VF acc[R][P * kVectorsPerPanel];
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < P * kVectorsPerPanel; ++v) {
      const size_t column = v * kLanesF;
      const size_t valid = column < valid_columns ? valid_columns - column : 0;
      acc[r][v] = first ? hn::Zero(d) : LoadOutputs(d, y + r * y_stride + column, valid);
    }
  for (size_t k = 0; k < block_k; ++k) {
    VF w[P * kVectorsPerPanel];
    for (size_t v = 0; v < P * kVectorsPerPanel; ++v) w[v] = hn::Load(d, block + (k * P * kPanelRows) + v * kLanesF);
    for (size_t r = 0; r < R; ++r) {
      const VF xr = hn::Set(d, x[r * x_stride + k]);
      for (size_t v = 0; v < P * kVectorsPerPanel; ++v) acc[r][v] = hn::MulAdd(xr, w[v], acc[r][v]);
    }
  }
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < P * kVectorsPerPanel; ++v) {
      const size_t column = v * kLanesF;
      if (column < valid_columns) StoreOutputs(d, acc[r][v], y + r * y_stride + column, valid_columns - column);
    }
}

using TileFn = void (*)(const float*, size_t, const float*, size_t, float*, size_t, size_t, bool);

template <size_t P, size_t... R>
constexpr auto TileTable(std::index_sequence<R...>) {
  return std::array<TileFn, sizeof...(R)>{{&Tile<R + 1, P>...}};
}

TileFn SelectTile(size_t rows, size_t panels) {
  static const auto kOne = TileTable<1>(std::make_index_sequence<kTileRows>());
  static const auto kTwo = TileTable<2>(std::make_index_sequence<kTileRows>());
  static const auto kThree = TileTable<3>(std::make_index_sequence<kTileRows>());
  if (panels == 1) return kOne[rows - 1];
  return panels == 2 ? kTwo[rows - 1] : kThree[rows - 1];
}

// Prefill: for each group of panels, widen a block of weights to f32 once, then run every
// row tile over it. The chains continue across blocks through y.
void MatmulBlocked(const float* x, size_t rows, const MatrixView& w, float* y, int threads) {
  const DF d;
  const size_t k_len = w.cols, n_len = w.rows;
  const size_t groups = (w.panels() + kTilePanels - 1) / kTilePanels;
  parallel_for(threads, groups, [&](size_t group_begin, size_t group_end) {
    const auto block = hwy::AllocateAligned<float>(kBlockK * kTilePanels * kPanelRows);
    for (size_t g = group_begin; g < group_end; ++g) {
      const size_t first_panel = g * kTilePanels;
      const size_t panels = std::min(kTilePanels, w.panels() - first_panel);
      const size_t n0 = first_panel * kPanelRows;
      const size_t valid_columns = std::min(panels * kPanelRows, n_len - n0);
      for (size_t k0 = 0; k0 < k_len; k0 += kBlockK) {
        const size_t block_k = std::min(kBlockK, k_len - k0);
        for (size_t p = 0; p < panels; ++p) {
          const auto* panel = static_cast<const unsigned char*>(w.panel(first_panel + p));
          for (size_t k = 0; k < block_k; ++k)
            for (size_t v = 0; v < kVectorsPerPanel; ++v)
              hn::Store(LoadWidened(d, w.dtype, panel + ((k0 + k) * kPanelRows + v * kLanesF) * dtype_size(w.dtype)), d,
                        block.get() + (k * panels + p) * kPanelRows + v * kLanesF);
        }
        for (size_t m0 = 0; m0 < rows; m0 += kTileRows) {
          const size_t tile_rows = std::min(kTileRows, rows - m0);
          SelectTile(tile_rows, panels)(x + m0 * k_len + k0, k_len, block.get(), block_k, y + m0 * n_len + n0, n_len,
                                        valid_columns, k0 == 0);
        }
      }
    }
  });
}

// Decode: one row, weights widened as they stream in. A group of kRowPanels panels gives
// independent chains to hide the fma latency.
constexpr size_t kRowPanels = 4;

void MatmulRowGroup(const float* x, const MatrixView& w, float* y, size_t group) {
  const DF d;
  const size_t element = dtype_size(w.dtype);
  const size_t first_panel = group * kRowPanels;
  const size_t panels = std::min(kRowPanels, w.panels() - first_panel);
  // A short last group repeats its last panel instead of branching in the loop.
  const unsigned char* base[kRowPanels];
  for (size_t p = 0; p < kRowPanels; ++p)
    base[p] = static_cast<const unsigned char*>(w.panel(first_panel + std::min(p, panels - 1)));
  VF acc[kRowPanels * kVectorsPerPanel];
  for (auto& a : acc) a = hn::Zero(d);
  for (size_t k = 0; k < w.cols; ++k) {
    const VF xk = hn::Set(d, x[k]);
    for (size_t p = 0; p < kRowPanels; ++p)
      for (size_t v = 0; v < kVectorsPerPanel; ++v) {
        const VF weights = LoadWidened(d, w.dtype, base[p] + (k * kPanelRows + v * kLanesF) * element);
        acc[p * kVectorsPerPanel + v] = hn::MulAdd(xk, weights, acc[p * kVectorsPerPanel + v]);
      }
  }
  for (size_t p = 0; p < panels; ++p)
    for (size_t v = 0; v < kVectorsPerPanel; ++v) {
      const size_t column = (first_panel + p) * kPanelRows + v * kLanesF;
      if (column < w.rows) StoreOutputs(d, acc[p * kVectorsPerPanel + v], y + column, w.rows - column);
    }
}

void MatmulRow(const float* x, const MatrixView& w, float* y, int threads) {
  const size_t groups = (w.panels() + kRowPanels - 1) / kRowPanels;
  parallel_for(threads, groups, [&](size_t group_begin, size_t group_end) {
    for (size_t g = group_begin; g < group_end; ++g) MatmulRowGroup(x, w, y, g);
  });
}

void Matmul(const float* x, size_t rows, const MatrixView& w, float* y, int threads) {
  if (rows == 1) return MatmulRow(x, w, y, threads);
  MatmulBlocked(x, rows, w, y, threads);
}

#else
void Matmul(const float* x, size_t rows, const MatrixView& w, float* y, int threads) {
  ref::matmul(x, rows, w, y, threads);
}
#endif  // DITTO_SIMD_HAS_FMA

}  // namespace ditto::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ditto::kernels {

HWY_EXPORT(Matmul);

void matmul(const float* x, size_t rows, const MatrixView& w, float* y, int threads) {
  HWY_DYNAMIC_DISPATCH(Matmul)(x, rows, w, y, threads);
}

}  // namespace ditto::kernels
#endif
