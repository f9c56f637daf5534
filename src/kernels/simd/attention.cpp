// SIMD causal attention over the paged KV cache, bit for bit the reference (docs/numerics.md):
// 16-lane dot products, the two-pass softmax, one fma chain per output dimension, each in the
// order of positions. The work is tiled so that every key and value loaded serves several
// query rows and heads, as the matmul tiles do: a tile is a run of consecutive query rows of one
// sequence with the query heads of one kv head (its row-heads); register tiles of row-heads x
// keys (scores) and row-heads x dimensions (values) sweep blocks of keys that stay in cache.
// Head sizes that are not a multiple of 16 run the reference (real models use 64 to 256).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/ref/math.h"
#include "kernels/thread_pool.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/simd/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ditto::HWY_NAMESPACE {
#if DITTO_SIMD_HAS_FMA

constexpr size_t kLanesF = hn::MaxLanes(DF());
static_assert(kLaneVectors <= 2, "SIMD attention needs 8 or 16 f32 lanes");
// Accumulator registers of a register tile: half the register file.
constexpr size_t kAccumulators = kLanesF == 16 ? 16 : 8;
constexpr size_t kTileRowHeads = 128;  // row-heads of a tile (so 64 rows for two heads per kv head)
// Keys every register tile of a tile sweeps before the next block: for scores, and for values.
constexpr size_t kKeyBlock = 32, kValueBlock = 64;
static_assert(kKeyBlock % kLanesF == 0, "key blocks of whole transposed groups");
constexpr size_t kBlockRows = std::max(kKeyBlock, kValueBlock);
// Kv heads a decode job sweeps together, a value block (kValueBlock positions) of each in turn,
// so that it reads their blocks' rows (which lie side by side) close together rather than one kv
// head after the other. Steps of one cache block (16 positions) cost a call and a reload of the
// outputs' chains every 16 keys (decode on Zen 4, one thread: at depth 1,024, in cache, 17-22
// GB/s against 20-26 in steps of 64; at depth 4,096 from memory 5% slower).
constexpr size_t kDecodeSpan = 2;
// When tiles are too few for the threads and long (decode at depth), scores split by keys and
// values by dimensions.
constexpr size_t kSplitKeys = 256;
constexpr size_t kSplitDims = 32;

// One query head of one query row: what it reads, where it writes, the keys it sees.
struct RowHead {
  const float* q;
  float* out;
  float* probs;       // probs[j - base] for key positions j of the tile (Tile::base)
  size_t first, end;  // it sees positions first .. end - 1
};

// A tile: row-heads (row-major) of consecutive query rows of one sequence, all reading kv head
// `kv`, and the positions base .. end - 1 some of them see.
struct Tile {
  const uint32_t* blocks;
  size_t kv, base, end;
  std::vector<RowHead> heads;
};

// ---- Scores: register tiles of NR row-heads x NK keys, folded together.

// The 16-lane fold (fold_lanes) of kLanesF sums at once, as a transposed tree: each level adds
// lane j + w of every sum to lane j, pairing two vectors into one, so that one vector of scores
// comes out. Sums arrive in segments of 2w lanes and leave in segments of w, the first
// vector's segments first; the lower lane is always the left operand, as in fold_lanes.
template <size_t W>
HWY_INLINE VF FoldPair(DF d, VF x, VF y) {
  if constexpr (2 * W == kLanesF) {
    return hn::Add(hn::ConcatLowerLower(d, y, x), hn::ConcatUpperUpper(d, y, x));
  } else if constexpr (W == 4) {  // 16 lanes: segments are the 128-bit blocks
    return hn::Add(hn::OddEvenBlocks(hn::SwapAdjacentBlocks(y), x), hn::OddEvenBlocks(y, hn::SwapAdjacentBlocks(x)));
  } else if constexpr (W == 2) {
    const hn::Repartition<uint64_t, DF> du;
    const auto xu = hn::BitCast(du, x), yu = hn::BitCast(du, y);
    return hn::Add(hn::BitCast(d, hn::InterleaveLower(du, xu, yu)), hn::BitCast(d, hn::InterleaveUpper(du, xu, yu)));
  } else {
    static_assert(W == 1);
    return hn::Add(hn::OddEven(hn::Shuffle2301(y), x), hn::OddEven(y, hn::Shuffle2301(x)));
  }
}

template <size_t W>
HWY_INLINE void FoldLevels(DF d, VF* sums, size_t count) {
  for (size_t i = 0; i < count / 2; ++i) sums[i] = FoldPair<W>(d, sums[2 * i], sums[2 * i + 1]);
  if constexpr (W > 1) FoldLevels<W / 2>(d, sums, count / 2);
}

// Where FoldLevels leaves each sum: lane l of its result is the fold of sums[kFoldOrder[l]].
constexpr std::array<size_t, kLanesF> FoldOrder() {
  std::array<std::array<size_t, kLanesF>, kLanesF> label{};  // label[i][l]: the sum lane l of vector i holds
  for (size_t i = 0; i < kLanesF; ++i)
    for (size_t l = 0; l < kLanesF; ++l) label[i][l] = i;
  size_t count = kLanesF;
  for (size_t w = kLanesF / 2; w >= 1; w /= 2, count /= 2)
    for (size_t i = 0; i < count / 2; ++i) {
      const auto x = label[2 * i], y = label[2 * i + 1];
      for (size_t l = 0; l < kLanesF; ++l) {
        if (2 * w == kLanesF) label[i][l] = l < w ? x[l] : y[l - w];
        else if (w == 4) label[i][l] = (l / 4) % 2 == 0 ? x[l] : y[l - 4];
        else if (w == 2) label[i][l] = l % 4 < 2 ? x[l] : y[l - 2];
        else label[i][l] = l % 2 == 0 ? x[l] : y[l - 1];
      }
    }
  return label[0];
}
constexpr std::array<size_t, kLanesF> kFoldOrder = FoldOrder();

// How far ahead (in positions) the loops that read cache rows ask for rows to come, into L2, a
// line as they read one: a sequence's blocks lie anywhere in the pool, a few KiB each, too short
// for the hardware's prefetcher. Asked for a block at a time, the lines took the miss buffers
// and the loads of the rows being read waited behind them (decode at depth 4,096 on Zen 4,
// attention_bench: 16-19 GB/s on 2 threads block by block, 23-28 spread; 32 or 128 rows ahead no
// better than 64).
constexpr size_t kPrefetchRows = 64;

// Asks for the line at `offset` of a row ahead where a line starts there.
HWY_INLINE void PrefetchLineAt(const unsigned char* ahead, size_t offset) {
  if (offset % 64 == 0) PrefetchIntoL2(ahead + offset);
}

// The scores (q[r] . key[k]) * scale of NR row-heads and NK keys (NR * NK = kLanesF) as one
// vector, lane r * NK + k: each a 16-lane dot product. Lane vector v of the 16 lanes (AVX2
// holds them in two registers) is a chain over dimensions v * kLanesF + 16 i, so the two run
// one after the other, with as many keys at once as the accumulators allow. Keys are rows of T.
template <DType T, size_t NR, size_t NK>
HWY_INLINE VF ScoreTile(DF d, const float* const* q, const unsigned char* const* keys,
                        const unsigned char* const* ahead, size_t head_dim, VF scale) {
  static_assert(NR * NK == kLanesF);
  constexpr size_t kGroup = std::min(NK, kAccumulators / NR);
  VF sums[kLanesF];
  for (size_t k0 = 0; k0 < NK; k0 += kGroup)
    for (size_t v = 0; v < kLaneVectors; ++v) {
      VF acc[NR][kGroup];
      for (auto& row : acc)
        for (auto& a : row) a = hn::Zero(d);
      for (size_t dim = v * kLanesF; dim < head_dim; dim += 16) {
        VF qv[NR];
        for (size_t r = 0; r < NR; ++r) qv[r] = hn::LoadU(d, q[r] + dim);
        for (size_t k = 0; k < kGroup; ++k) {
          PrefetchLineAt(ahead[k0 + k], dim * dtype_size(T));
          const VF kv = LoadWidened(d, T, keys[k0 + k] + dim * dtype_size(T));
          for (size_t r = 0; r < NR; ++r) acc[r][k] = hn::MulAdd(qv[r], kv, acc[r][k]);
        }
      }
      // The first fold level of two registers (lane j + lane j + 8) is their sum.
      for (size_t r = 0; r < NR; ++r)
        for (size_t k = 0; k < kGroup; ++k) {
          VF& sum = sums[kFoldOrder[r * NK + k0 + k]];
          sum = v == 0 ? acc[r][k] : hn::Add(sum, acc[r][k]);
        }
    }
  FoldLevels<kLanesF / 2>(d, sums, kLanesF);
  return hn::Mul(sums[0], scale);
}

// ---- Scores of many row-heads: keys transposed, so that a vector holds kLanesF keys and the
// 16 virtual lanes of each dot product are separate registers, folded by plain vector adds.

// Keys rows[0 .. count) of T, widened and transposed into groups of kLanesF keys: dimension dim
// of group g is the vector at keys_t + (g * head_dim + dim) * kLanesF. The last group is
// filled up with its last key.
template <DType T>
void TransposeKeys(DF d, const unsigned char* const* rows, const unsigned char* const* ahead, size_t count,
                   size_t head_dim, float* keys_t) {
  for (size_t g = 0; g * kLanesF < count; ++g)
    for (size_t dim0 = 0; dim0 < head_dim; dim0 += kLanesF) {
      VF m[kLanesF];
      for (size_t k = 0; k < kLanesF; ++k) {
        const size_t row = std::min(g * kLanesF + k, count - 1);
        PrefetchLineAt(ahead[row], dim0 * dtype_size(T));
        m[k] = LoadWidened(d, T, rows[row] + dim0 * dtype_size(T));
      }
      Transpose(d, m);
      for (size_t i = 0; i < kLanesF; ++i) hn::StoreU(m[i], d, keys_t + (g * head_dim + dim0 + i) * kLanesF);
    }
}

// acc[c]: the fma chains over dimensions first + 8 c + 16 i (c < C) of NR queries with G groups
// of transposed keys, run together, each query element loaded once for G groups.
template <size_t C, size_t NR, size_t G>
HWY_INLINE void Chains(DF d, const float* const* q, const float* keys_t, size_t head_dim, size_t first,
                       VF (&acc)[C][G][NR]) {
  for (size_t c = 0; c < C; ++c)
    for (size_t g = 0; g < G; ++g)
      for (size_t r = 0; r < NR; ++r) acc[c][g][r] = hn::Zero(d);
  for (size_t dim = first; dim < head_dim; dim += 16) {
    VF k[C][G];
    for (size_t c = 0; c < C; ++c)
      for (size_t g = 0; g < G; ++g) k[c][g] = hn::LoadU(d, keys_t + (g * head_dim + dim + 8 * c) * kLanesF);
    for (size_t r = 0; r < NR; ++r)
      for (size_t c = 0; c < C; ++c) {
        const VF qv = hn::Set(d, q[r][dim + 8 * c]);
        for (size_t g = 0; g < G; ++g) acc[c][g][r] = hn::MulAdd(qv, k[c][g], acc[c][g][r]);
      }
  }
}

// Lane sums of the 16-lane dot products of NR queries with G groups of transposed keys (group g
// at keys_t + g * kLanesF * head_dim), folded as fold_lanes folds: FoldedLanes<W, J> is lane J
// after the fold levels above W (W = 16: virtual lane J itself, the fma chain over dimensions
// J + 16 i), i.e. lane J plus lane J + W of the level below. The two chains of the last level
// run together where the registers hold both (2 G NR accumulators), else one after the other.
template <size_t W, size_t J, size_t NR, size_t G>
HWY_INLINE void FoldedLanes(DF d, const float* const* q, const float* keys_t, size_t head_dim, VF (&out)[G][NR]) {
  if constexpr (W == 8) {
    if constexpr (2 * G * NR <= kAccumulators) {
      VF both[2][G][NR];
      Chains<2, NR, G>(d, q, keys_t, head_dim, J, both);
      for (size_t g = 0; g < G; ++g)
        for (size_t r = 0; r < NR; ++r) out[g][r] = hn::Add(both[0][g][r], both[1][g][r]);
    } else {
      VF lo[1][G][NR], hi[1][G][NR];
      Chains<1, NR, G>(d, q, keys_t, head_dim, J, lo);
      Chains<1, NR, G>(d, q, keys_t, head_dim, J + 8, hi);
      for (size_t g = 0; g < G; ++g)
        for (size_t r = 0; r < NR; ++r) out[g][r] = hn::Add(lo[0][g][r], hi[0][g][r]);
    }
  } else {
    VF hi[G][NR];
    FoldedLanes<2 * W, J, NR, G>(d, q, keys_t, head_dim, out);
    FoldedLanes<2 * W, J + W, NR, G>(d, q, keys_t, head_dim, hi);
    for (size_t g = 0; g < G; ++g)
      for (size_t r = 0; r < NR; ++r) out[g][r] = hn::Add(out[g][r], hi[g][r]);
  }
}

// Scores of row-heads rh[0 .. n) (n <= NR) for the key groups over positions k0 .. k1 - 1 of the
// transposed key block that starts at b0 and ends before b1, two groups at a time, so that each
// query element loaded serves two groups (with AVX2's 16 registers the two chains of the last
// fold level then run one after the other: prefill at 4,096 positions 8% faster than one group
// with both chains). Whole groups are stored, but nothing at or past b1, which may be another job's.
// HD is the head size where it is known when compiling (else 0): the chains over dimensions are
// short (8 steps at 128), and with their count fixed, prefill at 4,096 positions ran 2-3% faster
// (AVX2 on Zen 4, one thread; 1-2% with AVX-512).
constexpr size_t kScoreGroups = 2;

template <size_t NR, size_t HD>
void ScoreGroups(DF d, const RowHead* rh, size_t n, const float* keys_t, size_t b0, size_t b1, size_t k0, size_t k1,
                 size_t base, size_t runtime_head_dim, VF scale) {
  const size_t head_dim = HD ? HD : runtime_head_dim;
  const float* q[NR];
  for (size_t r = 0; r < NR; ++r) q[r] = rh[std::min(r, n - 1)].q;
  const auto store = [&](size_t j, const VF* scores) HWY_ATTR {
    const size_t count = std::min(kLanesF, b1 - j);
    for (size_t r = 0; r < n; ++r) {
      float* to = rh[r].probs + (j - base);
      const VF scaled = hn::Mul(scores[r], scale);
      if (count == kLanesF) {
        hn::StoreU(scaled, d, to);
      } else {
        HWY_ALIGN float lanes[kLanesF];
        hn::Store(scaled, d, lanes);
        std::memcpy(to, lanes, count * sizeof(float));
      }
    }
  };
  size_t j = b0 + (k0 - b0) / kLanesF * kLanesF;
  for (; j + (kScoreGroups - 1) * kLanesF < k1; j += kScoreGroups * kLanesF) {
    VF scores[kScoreGroups][NR];
    FoldedLanes<1, 0, NR, kScoreGroups>(d, q, keys_t + (j - b0) * head_dim, head_dim, scores);
    for (size_t g = 0; g < kScoreGroups; ++g) store(j + g * kLanesF, scores[g]);
  }
  if (j < k1) {
    VF scores[1][NR];
    FoldedLanes<1, 0, NR, 1>(d, q, keys_t + (j - b0) * head_dim, head_dim, scores);
    store(j, scores[0]);
  }
}

// Row-heads per register tile: at most 4, fewer for a tile's last ones.
size_t SubTile(size_t remaining) { return remaining >= 3 ? 4 : remaining; }

// 16-bit keys and values are widened once per key block when several register tiles read them;
// a single one converts them in its registers as it goes.
bool WidenFor(const Tile& tile) { return tile.heads.size() > SubTile(tile.heads.size()); }

// Keys or values of one kv head, positions first .. first + count - 1 of `part` (cache.k or
// cache.v): rows[i] is position first + i, of which dimensions dim0 .. dim1 - 1 are read. They
// are read where they lie, or, with `widen`, first widened (exactly) to f32 into `widened`
// (count * head_dim floats), once for all the register tiles that read them. ahead[i] is the row
// kPrefetchRows positions after rows[i], or rows[i] itself where that lies at or past `limit`;
// widening prefetches it, the loops that read unwidened rows do. Returns the type of the rows.
template <DType T>
DType RowsOf(DF d, const ref::KVLayerView& cache, const void* part, const uint32_t* blocks, size_t kv, size_t first,
             size_t count, size_t limit, size_t dim0, size_t dim1, bool widen, float* widened,
             const unsigned char** rows, const unsigned char** ahead) {
  const auto* base = static_cast<const unsigned char*>(part);
  const size_t row_bytes = cache.head_dim * dtype_size(T);
  // out[i] = the row of position + i (i < n), a run of side by side rows per cache block.
  const auto find = [&](size_t position, size_t n, const unsigned char** out) {
    for (size_t i = 0; i < n;) {
      const size_t at = position + i, slot = at % cache.block_size, run = std::min(n - i, cache.block_size - slot);
      const unsigned char* row = base + cache.offset(blocks[at / cache.block_size], kv, slot);
      for (size_t s = 0; s < run; ++s) out[i + s] = row + s * row_bytes;
      i += run;
    }
  };
  find(first, count, rows);
  const size_t ahead_first = first + kPrefetchRows;
  const size_t ahead_count = ahead_first < limit ? std::min(count, limit - ahead_first) : 0;
  find(ahead_first, ahead_count, ahead);
  std::copy(rows + ahead_count, rows + count, ahead + ahead_count);
  if (widen)
    for (size_t i = 0; i < count; ++i) {
      float* row = widened + i * cache.head_dim;
      for (size_t dim = dim0; dim < dim1; dim += kLanesF) {
        PrefetchLineAt(ahead[i], dim * dtype_size(T));
        hn::StoreU(LoadWidened(d, T, rows[i] + dim * dtype_size(T)), d, row + dim);
      }
      rows[i] = reinterpret_cast<const unsigned char*>(row);
    }
  return widen ? DType::F32 : T;
}

DType Rows(DF d, const ref::KVLayerView& cache, const void* part, const Tile& tile, size_t first, size_t count,
           size_t dim0, size_t dim1, bool widen, float* widened, const unsigned char** rows,
           const unsigned char** ahead) {
  const auto* blocks = tile.blocks;
  switch (cache.dtype) {
    case DType::BF16:
      return RowsOf<DType::BF16>(d, cache, part, blocks, tile.kv, first, count, tile.end, dim0, dim1, widen, widened,
                                 rows, ahead);
    case DType::F16:
      return RowsOf<DType::F16>(d, cache, part, blocks, tile.kv, first, count, tile.end, dim0, dim1, widen, widened,
                                rows, ahead);
    default:
      return RowsOf<DType::F32>(d, cache, part, blocks, tile.kv, first, count, tile.end, dim0, dim1, widen, widened,
                                rows, ahead);
  }
}

// Calls visit(std::integral_constant<size_t, HD>{}) with the head size of real models, else 0.
template <class Visit>
HWY_INLINE void WithHeadDim(size_t head_dim, const Visit& visit) {
  switch (head_dim) {
    case 64: return visit(std::integral_constant<size_t, 64>{});
    case 128: return visit(std::integral_constant<size_t, 128>{});
    case 256: return visit(std::integral_constant<size_t, 256>{});
    default: return visit(std::integral_constant<size_t, 0>{});
  }
}

// Calls visit(std::integral_constant<DType, T>{}) for the type of a key block's rows.
template <class Visit>
HWY_INLINE void WithRowType(DType type, const Visit& visit) {
  switch (type) {
    case DType::BF16: return visit(std::integral_constant<DType, DType::BF16>{});
    case DType::F16: return visit(std::integral_constant<DType, DType::F16>{});
    default: return visit(std::integral_constant<DType, DType::F32>{});
  }
}

// Runs of keys a register tile of scores read in place takes its keys from, side by side (see
// ScoreRange).
constexpr size_t kKeyRuns = 4;

// Scores of row-heads rh[0 .. n) (n <= NR) for keys k0 .. k1 - 1, of the key block whose rows
// start at position b0, read where they lie. The keys are cut into kKeyRuns runs, and a register
// tile takes NK / kKeyRuns consecutive keys of each, so that the rows it reads lie in that many
// cache blocks (pages) at once: the hardware's prefetcher then keeps each run's lines coming,
// where a tile of consecutive keys read one page at a time and waited on memory (decode at depth
// 4,096 on a 2-core Xeon, attention_bench: 16-19 -> 20-23 GB/s). Each score is the same dot product
// whichever keys share its tile.
template <DType T, size_t NR>
void ScoreRange(DF d, const RowHead* rh, size_t n, const unsigned char* const* key_rows,
                const unsigned char* const* ahead_rows, size_t b0, size_t k0, size_t k1, size_t base, size_t head_dim,
                VF scale) {
  constexpr size_t NK = kLanesF / NR;
  constexpr size_t kRuns = std::min(kKeyRuns, NK), kPerRun = NK / kRuns;
  const float* q[NR];
  for (size_t r = 0; r < NR; ++r) q[r] = rh[std::min(r, n - 1)].q;
  // Keys k0 + s * run .. of run s, run a whole number of kPerRun.
  const size_t run = ((k1 - k0 + kRuns - 1) / kRuns + kPerRun - 1) / kPerRun * kPerRun;
  for (size_t t = 0; t < run; t += kPerRun) {
    const unsigned char *keys[NK], *ahead[NK];
    for (size_t k = 0; k < NK; ++k) {
      const size_t row = std::min(k0 + k / kPerRun * run + t + k % kPerRun, k1 - 1) - b0;
      keys[k] = key_rows[row];
      ahead[k] = ahead_rows[row];
    }
    HWY_ALIGN float lanes[kLanesF];
    hn::Store(ScoreTile<T, NR, NK>(d, q, keys, ahead, head_dim, scale), d, lanes);
    for (size_t s = 0; s < kRuns; ++s) {
      const size_t first = k0 + s * run + t;
      if (first >= k1) break;
      // A whole run in one copy of a size known when compiling: with the size read at run time,
      // the copies (a loop of small moves) took about a fifth of decode's score time.
      const size_t count = std::min(kPerRun, k1 - first);
      for (size_t r = 0; r < n; ++r) {
        float* to = rh[r].probs + (first - base);
        const float* from = lanes + r * NK + s * kPerRun;
        if (count == kPerRun) std::memcpy(to, from, kPerRun * sizeof(float));
        else std::memcpy(to, from, count * sizeof(float));
      }
    }
  }
}

// The tile's scores of keys k0 .. k1 - 1 (in base .. end - 1), times the layer's scale, stored
// in each row-head's probs; positions a row-head does not see may get a score, never used.
void ScoreKeys(DF d, const Tile& tile, const ref::KVLayerView& cache, float scale, size_t k0, size_t k1,
               float* widened) {
  const VF scale_v = hn::Set(d, scale);
  const unsigned char *rows[kBlockRows], *ahead[kBlockRows];
  const size_t count = tile.heads.size();
  // Keys read in place come kBlockRows at a time, so that ScoreRange's runs lie in several pages.
  const size_t block = WidenFor(tile) ? kKeyBlock : kBlockRows;
  for (size_t b0 = k0; b0 < k1; b0 += block) {
    const size_t b1 = std::min(k1, b0 + block);
    const DType type = Rows(d, cache, cache.k, tile, b0, b1 - b0, 0, cache.head_dim, false, widened, rows, ahead);
    WithRowType(type, [&](auto row_type) {
      constexpr DType T = decltype(row_type)::value;
      if (WidenFor(tile)) {
        TransposeKeys<T>(d, rows, ahead, b1 - b0, cache.head_dim, widened);
        WithHeadDim(cache.head_dim, [&](auto head_dim) {
          for (size_t i = 0; i < count; i += 4) {
            const size_t n = std::min<size_t>(4, count - i);
            const RowHead* rh = &tile.heads[i];
            const size_t lo = std::max(b0, rh[0].first), hi = std::min(b1, rh[n - 1].end);
            if (lo < hi)
              ScoreGroups<4, decltype(head_dim)::value>(d, rh, n, widened, b0, b1, lo, hi, tile.base, cache.head_dim,
                                                         scale_v);
          }
        });
        return;
      }
      for (size_t i = 0; i < count;) {
        const size_t nr = SubTile(count - i), n = std::min(nr, count - i);
        const RowHead* rh = &tile.heads[i];
        // Rows ascend, so the first row-head sees from the lowest position, the last to the highest.
        const size_t lo = std::max(b0, rh[0].first), hi = std::min(b1, rh[n - 1].end);
        if (lo < hi) {
          if (nr == 4) ScoreRange<T, 4>(d, rh, n, rows, ahead, b0, lo, hi, tile.base, cache.head_dim, scale_v);
          else if (nr == 2) ScoreRange<T, 2>(d, rh, n, rows, ahead, b0, lo, hi, tile.base, cache.head_dim, scale_v);
          else ScoreRange<T, 1>(d, rh, n, rows, ahead, b0, lo, hi, tile.base, cache.head_dim, scale_v);
        }
        i += n;
      }
    });
  }
}

// ---- Softmax of row-heads' scores in place: exp(s - max) summed in the 16-lane order, then
// divided by the sum. A row-head's exp pass also divides the row-head before it and finds the
// maximum of the one after it: the divider works beside the fma ports there, where alone, a pass
// of its own, the division took about a third of the softmax's time and the maximum another
// eighth (prefill at 4,096 positions on a Xeon, AVX-512).

// Scores probs[0 .. keys) of one row-head; their maximum and the sum of their exps once known.
struct SoftmaxRow {
  float* probs = nullptr;
  size_t keys = 0;
  float max = -INFINITY, total = 0.0f;
};

// The maximum of row's scores: max_v holds that of those before j, in vectors of kLanesF, which
// continue from j, then the rest one by one. The maximum is exact in any order; like the
// reference's it passes over NaN scores (Max returns its second operand when one is NaN) and may
// differ from it only in the sign of a zero, which no s - max then tells apart.
HWY_INLINE float MaxFrom(DF d, const SoftmaxRow& row, size_t j, VF max_v) {
  for (; j + kLanesF <= row.keys; j += kLanesF) max_v = hn::Max(hn::LoadU(d, row.probs + j), max_v);
  float max = hn::GetLane(hn::MaxOfLanes(d, max_v));
  for (; j < row.keys; ++j)
    if (row.probs[j] > max) max = row.probs[j];
  return max;
}

// row.probs[j ..] divided by row.total: vectors of kLanesF from j on, then the rest one by one.
HWY_INLINE void DivideFrom(DF d, const SoftmaxRow& row, size_t j) {
  const VF total_v = hn::Set(d, row.total);
  for (; j + kLanesF <= row.keys; j += kLanesF)
    hn::StoreU(hn::Div(hn::LoadU(d, row.probs + j), total_v), d, row.probs + j);
  for (; j < row.keys; ++j) row.probs[j] = row.probs[j] / row.total;
}

// exp_f32 of each lane of x (scores minus their maximum): the shorter polynomial path where every
// lane lies in [-87, 0], as they do but for infinite or NaN scores.
HWY_INLINE VF ExpOfScores(DF d, VF x) {
  const bool in_range = hn::AllTrue(d, hn::And(hn::Ge(x, hn::Set(d, -87.0f)), hn::Le(x, hn::Zero(d))));
  return in_range ? ExpNonPositive(d, x) : Exp(d, x);
}

// row's scores (whose max is known) become exp(s - max), and row.total their sum; meanwhile the
// vectors of `divided` (a row whose total is known, or none) at the same positions are divided,
// and the maximum of `next` (or none) is found.
HWY_INLINE void ExpAndSum(DF d, SoftmaxRow& row, const SoftmaxRow* divided, SoftmaxRow* next) {
  float* probs = row.probs;
  const size_t keys = row.keys, divide_to = divided ? divided->keys : 0, max_to = next ? next->keys : 0;
  const VF max_v = hn::Set(d, row.max), total_v = hn::Set(d, divided ? divided->total : 1.0f);
  VF next_max = hn::Set(d, -INFINITY);
  VF lanes[kLaneVectors];
  for (auto& lane : lanes) lane = hn::Zero(d);
  size_t j = 0;
  for (; j + 16 <= keys; j += 16) {
    for (size_t v = 0; v < kLaneVectors; ++v) {
      const VF e = ExpOfScores(d, hn::Sub(hn::LoadU(d, probs + j + v * kLanesF), max_v));
      hn::StoreU(e, d, probs + j + v * kLanesF);
      lanes[v] = hn::Add(lanes[v], e);
    }
    if (j + 16 <= divide_to)
      for (size_t v = 0; v < kLaneVectors; ++v) {
        float* at = divided->probs + j + v * kLanesF;
        hn::StoreU(hn::Div(hn::LoadU(d, at), total_v), d, at);
      }
    if (j + 16 <= max_to)
      for (size_t v = 0; v < kLaneVectors; ++v)
        next_max = hn::Max(hn::LoadU(d, next->probs + j + v * kLanesF), next_max);
  }
  // Where the loop stopped dividing and taking the maximum, the rest.
  if (divided) DivideFrom(d, *divided, std::min(j, divide_to / 16 * 16));
  if (next) next->max = MaxFrom(d, *next, std::min(j, max_to / 16 * 16), next_max);
  // The last keys % 16 scores in vectors too, score j in lane j % 16 as in the reference: the
  // lanes past them are neither stored nor summed (adding +0 to a sum of exps leaves it as it is).
  // One by one, each exp_f32's fmas were calls into libm: 1.4% of SmolLM2's 16-token chunks.
  for (size_t v = 0; v < kLaneVectors && j + v * kLanesF < keys; ++v) {
    const size_t at = j + v * kLanesF;
    const auto valid = hn::FirstN(d, keys - at);
    const VF e = ExpOfScores(d, hn::IfThenElseZero(valid, hn::Sub(hn::MaskedLoad(valid, d, probs + at), max_v)));
    hn::BlendedStore(e, valid, d, probs + at);
    lanes[v] = hn::Add(lanes[v], hn::IfThenElseZero(valid, e));
  }
  HWY_ALIGN float scalar_lanes[16];
  for (size_t v = 0; v < kLaneVectors; ++v) hn::Store(lanes[v], d, scalar_lanes + v * kLanesF);
  row.total = ref::fold_lanes(scalar_lanes);
}

// The softmax of rows row(0) .. row(count - 1) (SoftmaxRow values), one after the other.
template <class Row>
HWY_INLINE void Softmaxes(DF d, size_t count, const Row& row) {
  if (count == 0) return;
  SoftmaxRow previous, current = row(0);
  current.max = MaxFrom(d, current, 0, hn::Set(d, -INFINITY));
  for (size_t i = 0; i < count; ++i) {
    SoftmaxRow next = i + 1 < count ? row(i + 1) : SoftmaxRow{};
    ExpAndSum(d, current, i > 0 ? &previous : nullptr, i + 1 < count ? &next : nullptr);
    previous = current;
    current = next;
  }
  DivideFrom(d, previous, 0);
}

// Row-head rh's scores, the positions it sees, as SoftmaxRow.
SoftmaxRow RowOf(const Tile& tile, const RowHead& rh) {
  return {rh.probs + (rh.first - tile.base), rh.end - rh.first};
}

// ---- Values: register tiles of NR row-heads x NV vectors of dimensions.

// Row-heads of a tile's register tiles of values, but for its last few (SubTile). With AVX2,
// 4 row-heads x 2 vectors (8 accumulators, 8 fmas a key) only just cover the fma's latency at
// two a cycle; 6 x 2 fit its 16 registers when each probability is broadcast as it is used
// (prefill at 4,096 positions on Zen 4, one thread: 2.5% faster). AVX-512 on Zen 4 keeps 4 x 4:
// 6 x 4 was no faster.
constexpr size_t kValueRowHeads = kLanesF == 8 ? 6 : 4;
constexpr size_t ValueVectors(size_t row_heads) { return row_heads == 6 ? 2 : kAccumulators / row_heads; }

// out[r][dim0 ..] += the fma chain of probs[r][j] * v_j over keys j = j0 .. j1 - 1 (of the key
// block whose rows start at b0), in increasing j, continuing the chains stored in out. With
// kMasked, a row-head skips the keys it does not see; with kAhead, it prefetches the rows ahead
// (RowsOf), as rows read where they lie need (widened ones were prefetched as they were widened).
template <DType T, size_t NR, size_t NV, bool kMasked, bool kAhead>
HWY_INLINE void ValueTile(DF d, const RowHead* const* rh, const unsigned char* const* value_rows,
                          const unsigned char* const* ahead_rows, size_t b0, size_t j0, size_t j1, size_t base,
                          size_t dim0) {
  VF acc[NR][NV];
  for (size_t r = 0; r < NR; ++r)
    for (size_t v = 0; v < NV; ++v) acc[r][v] = hn::LoadU(d, rh[r]->out + dim0 + v * kLanesF);
  for (size_t j = j0; j < j1; ++j) {
    const unsigned char* vj = value_rows[j - b0] + dim0 * dtype_size(T);
    // The lines of the same dimensions of the row ahead: a count known when compiling, no branches.
    if constexpr (kAhead)
      for (size_t line = 0; line < (NV * kLanesF * dtype_size(T) + 63) / 64; ++line)
        PrefetchIntoL2(ahead_rows[j - b0] + dim0 * dtype_size(T) + line * 64);
    VF values[NV];
    for (size_t v = 0; v < NV; ++v) values[v] = LoadWidened(d, T, vj + v * kLanesF * dtype_size(T));
    for (size_t r = 0; r < NR; ++r) {
      if (kMasked && !(rh[r]->first <= j && j < rh[r]->end)) continue;
      const VF p = hn::Set(d, rh[r]->probs[j - base]);
      for (size_t v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(p, values[v], acc[r][v]);
    }
  }
  for (size_t r = 0; r < NR; ++r)
    for (size_t v = 0; v < NV; ++v) hn::StoreU(acc[r][v], d, rh[r]->out + dim0 + v * kLanesF);
}

// ValueTile over output vectors v0 .. v1 - 1: NV at a time, then the rest in halves.
template <DType T, size_t NR, size_t NV, bool kMasked, bool kAhead>
void ValueSlices(DF d, const RowHead* const* rh, const unsigned char* const* value_rows,
                 const unsigned char* const* ahead_rows, size_t b0, size_t j0, size_t j1, size_t base, size_t v0,
                 size_t v1) {
  if (j0 >= j1) return;
  size_t v = v0;
  for (; v + NV <= v1; v += NV)
    ValueTile<T, NR, NV, kMasked, kAhead>(d, rh, value_rows, ahead_rows, b0, j0, j1, base, v * kLanesF);
  if constexpr (NV > 1)
    ValueSlices<T, NR, NV / 2, kMasked, kAhead>(d, rh, value_rows, ahead_rows, b0, j0, j1, base, v, v1);
}

// Values of row-heads rh[0 .. n) (n <= NR) for keys lo .. hi - 1: the keys all of them see in
// one sweep, those at the edges (the causal diagonal, a window's start) with masks.
template <DType T, size_t NR, bool kAhead>
void ValueRange(DF d, const RowHead* rh, size_t n, const unsigned char* const* value_rows,
                const unsigned char* const* ahead_rows, size_t b0, size_t lo, size_t hi, size_t base, size_t v0,
                size_t v1) {
  constexpr size_t NV = ValueVectors(NR);
  const RowHead* tile[NR];
  for (size_t r = 0; r < NR; ++r) tile[r] = &rh[std::min(r, n - 1)];
  const size_t all_lo = std::max(lo, rh[n - 1].first), all_hi = std::min(hi, rh[0].end);
  if (all_lo >= all_hi)
    return ValueSlices<T, NR, NV, true, kAhead>(d, tile, value_rows, ahead_rows, b0, lo, hi, base, v0, v1);
  ValueSlices<T, NR, NV, true, kAhead>(d, tile, value_rows, ahead_rows, b0, lo, all_lo, base, v0, v1);
  ValueSlices<T, NR, NV, false, kAhead>(d, tile, value_rows, ahead_rows, b0, all_lo, all_hi, base, v0, v1);
  ValueSlices<T, NR, NV, true, kAhead>(d, tile, value_rows, ahead_rows, b0, all_hi, hi, base, v0, v1);
}

// Output vectors v0 .. v1 - 1 of every row-head of the tile set to +0, where their chains start.
void StartOutputs(DF d, const Tile& tile, size_t v0, size_t v1) {
  for (const RowHead& rh : tile.heads)
    for (size_t v = v0; v < v1; ++v) hn::StoreU(hn::Zero(d), d, rh.out + v * kLanesF);
}

// WeightValues over one block of values, positions b0 .. b1 - 1, as RowsOf gave their rows.
template <DType T, bool kAhead>
void WeighBlock(DF d, const Tile& tile, const unsigned char* const* rows, const unsigned char* const* ahead, size_t b0,
                size_t b1, size_t v0, size_t v1) {
  const size_t count = tile.heads.size();
  for (size_t i = 0; i < count;) {
    const size_t nr = count - i >= kValueRowHeads ? kValueRowHeads : SubTile(count - i), n = std::min(nr, count - i);
    const RowHead* rh = &tile.heads[i];
    const size_t lo = std::max(b0, rh[0].first), hi = std::min(b1, rh[n - 1].end);
    if (lo < hi) {
      if (nr == 6) ValueRange<T, 6, kAhead>(d, rh, n, rows, ahead, b0, lo, hi, tile.base, v0, v1);
      else if (nr == 4) ValueRange<T, 4, kAhead>(d, rh, n, rows, ahead, b0, lo, hi, tile.base, v0, v1);
      else if (nr == 2) ValueRange<T, 2, kAhead>(d, rh, n, rows, ahead, b0, lo, hi, tile.base, v0, v1);
      else ValueRange<T, 1, kAhead>(d, rh, n, rows, ahead, b0, lo, hi, tile.base, v0, v1);
    }
    i += n;
  }
}

// The tile's outputs, vectors v0 .. v1 - 1 of every row-head: their chains continued over the
// keys k0 .. k1 - 1 (all of them before k1 already done).
void WeightValues(DF d, const Tile& tile, const ref::KVLayerView& cache, size_t k0, size_t k1, size_t v0, size_t v1,
                  float* widened) {
  const unsigned char *rows[kValueBlock], *ahead[kValueBlock];
  for (size_t b0 = k0; b0 < k1; b0 += kValueBlock) {
    const size_t b1 = std::min(k1, b0 + kValueBlock);
    // f32 rows are read where they lie: widening them would only copy them.
    const bool widen = WidenFor(tile) && cache.dtype != DType::F32;
    const DType type = Rows(d, cache, cache.v, tile, b0, b1 - b0, v0 * kLanesF, v1 * kLanesF, widen, widened, rows,
                            ahead);
    // Widened rows are f32, and were prefetched as they were widened.
    if (widen) WeighBlock<DType::F32, false>(d, tile, rows, ahead, b0, b1, v0, v1);
    else
      WithRowType(type, [&](auto row_type) {
        WeighBlock<decltype(row_type)::value, true>(d, tile, rows, ahead, b0, b1, v0, v1);
      });
  }
}

// ---- The pass: tiles, and who computes what.

// Room for a block of keys or values widened to f32 (or transposed), aligned to cache lines: a
// vector load across two lines costs about two (prefill at 4,096 positions was 10% slower with
// the 16-byte alignment of a std::vector).
hwy::AlignedFreeUniquePtr<float[]> WidenedBuffer(size_t head_dim) {
  return hwy::AllocateAligned<float>(kBlockRows * head_dim);
}

// Whether `rows` are a chunk of one sequence: several consecutive positions, each seeing at least
// kChunkDepth times as many keys as there are rows, so that their first and second halves cost
// within 11% of each other.
constexpr size_t kChunkDepth = 4;
bool ChunkAtDepth(std::span<const ref::AttentionRow> rows, const ref::AttentionParams& params) {
  if (rows.size() < 2) return false;
  for (size_t t = 1; t < rows.size(); ++t)
    if (rows[t].blocks != rows[0].blocks || rows[t].position != rows[0].position + t) return false;
  return rows[0].position + 1 - params.first_key(rows[0].position) >= kChunkDepth * rows.size();
}

void Attention(const float* q, std::span<const ref::AttentionRow> rows, const ref::KVLayerView& cache, size_t heads,
               const ref::AttentionParams& params, float* out, int threads) {
  if (cache.head_dim % 16 != 0) return ref::attention(q, rows, cache, heads, params, out, threads);
  const DF d;
  const size_t head_dim = cache.head_dim, kv_heads = cache.kv_heads;
  const size_t group = heads / kv_heads, width = heads * head_dim, vectors = head_dim / kLanesF;
  // Rows per tile: as many as kTileRowHeads allows, but fewer where that would leave too few tiles
  // for the threads (a 16-row chunk of one sequence gives one tile per kv head), so that
  // prefill keeps one job per tile rather than the split of decode below: two runs of rows per
  // thread, which the jobs' order balances (see below) — or, for a chunk of one sequence at depth,
  // whose rows see about as many keys each, as few runs as give each thread as many tiles: each
  // thread then reads the keys and values once, and transposes each key block for more rows.
  const bool chunk_at_depth = ChunkAtDepth(rows, params);
  size_t runs_wanted = threads == 1 ? 1 : (2 * size_t(threads) + kv_heads - 1) / kv_heads;
  if (chunk_at_depth) runs_wanted = std::min(runs_wanted, size_t(threads) / std::gcd(size_t(threads), kv_heads));
  const size_t tile_rows =
      std::clamp<size_t>((rows.size() + runs_wanted - 1) / runs_wanted, 1, std::max<size_t>(1, kTileRowHeads / group));
  // Runs of consecutive positions of one sequence, cut every tile_rows rows: (first row, rows).
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t t = 0; t < rows.size();) {
    size_t n = 1;
    while (t + n < rows.size() && n < tile_rows && rows[t + n].blocks == rows[t].blocks &&
           rows[t + n].position == rows[t].position + n)
      ++n;
    runs.emplace_back(t, n);
    t += n;
  }
  // Tile i: run i % runs, kv head i / runs, so that neighbouring tiles share their keys and values.
  const auto make_tile = [&](size_t i) {
    const auto [row, count] = runs[i % runs.size()];
    Tile tile{rows[row].blocks, i / runs.size(), params.first_key(rows[row].position), rows[row + count - 1].position + 1, {}};
    tile.heads.reserve(count * group);
    for (size_t t = row; t < row + count; ++t)
      for (size_t head = tile.kv * group; head < tile.kv * group + group; ++head)
        tile.heads.push_back({q + t * width + head * head_dim, out + t * width + head * head_dim, nullptr,
                              params.first_key(rows[t].position), rows[t].position + 1});
    return tile;
  };
  // Room in `probs` for the scores of every row-head of `some` tiles, one after the other.
  const auto give_probs = [](std::vector<Tile>& some, std::vector<float>& probs) {
    size_t floats = 0;
    for (const Tile& tile : some) floats += tile.heads.size() * (tile.end - tile.base);
    probs.resize(floats);
    float* next = probs.data();
    for (Tile& tile : some)
      for (RowHead& rh : tile.heads) {
        rh.probs = next;
        next += tile.end - tile.base;
      }
  };
  const size_t tiles = runs.size() * kv_heads;
  // The most keys a tile sees: up to kSplitKeys, the split below would not divide any tile's
  // scores, and its three hand-offs to the threads cost more than the little work they share
  // (SmolLM2's decode at depth 0 to 128 spent about 15 microseconds a layer in them, 2 threads).
  size_t widest = 0;
  for (const auto& [row, count] : runs)
    widest = std::max(widest, rows[row + count - 1].position + 1 - params.first_key(rows[row].position));

  if (threads == 1 || tiles >= (chunk_at_depth ? 1 : 2) * size_t(threads) || widest <= kSplitKeys) {
    // Enough tiles: each is one job, computed from its keys to its outputs — but tiles of one
    // register tile (decode) read their keys and values in place, at the speed of memory, so
    // there a job takes kDecodeSpan kv heads of a run and sweeps them side by side.
    size_t longest = 0;
    for (const auto& run : runs) longest = std::max(longest, run.second);
    const size_t span = longest * group <= 4 && kv_heads % kDecodeSpan == 0 ? kDecodeSpan : 1;
    parallel_for(threads, tiles / span, [&](size_t begin, size_t end) {
      std::vector<float> probs;
      const auto widened = WidenedBuffer(head_dim);
      std::vector<Tile> swept;
      for (size_t job = begin; job < end; ++job) {
        // Job j: kv heads (j / runs) * span .. + span - 1 (tiles kv * runs + run) of a run taken
        // from the ends of the runs inwards, j % runs = 0, 1, 2, 3 .. the runs 0, last, 1, last - 1
        // ..: a prompt's later runs see more keys, and each thread's share of consecutive jobs
        // then costs about the same. In order, the jobs of the last and dearest runs were left to
        // the end and the other thread waited (pp512 on a 2-core Xeon: the caller 16.5% of
        // attention's time with SmolLM2's 3 kv heads, 14.3% with Gemma 3 270M's one; then 4.8%
        // and 0.8%).
        swept.clear();
        const size_t i = job % runs.size(), run = i % 2 == 0 ? i / 2 : runs.size() - 1 - i / 2;
        for (size_t kv = job / runs.size() * span; kv < (job / runs.size() + 1) * span; ++kv)
          swept.push_back(make_tile(kv * runs.size() + run));
        give_probs(swept, probs);
        // Keys base .. end - 1 (the run's, the same in each kv head), a value block at a time
        // through every tile of the job in turn; one tile takes them at once.
        const size_t base = swept[0].base, end_key = swept[0].end;
        const auto sweep = [&](const auto& step) {
          for (size_t k0 = base; k0 < end_key;) {
            const size_t k1 = span == 1 ? end_key : std::min(end_key, (k0 / kValueBlock + 1) * kValueBlock);
            for (const Tile& tile : swept) step(tile, k0, k1);
            k0 = k1;
          }
        };
        sweep([&](const Tile& tile, size_t k0, size_t k1) {
          ScoreKeys(d, tile, cache, params.scale, k0, k1, widened.get());
        });
        for (const Tile& tile : swept) {
          Softmaxes(d, tile.heads.size(), [&](size_t i) { return RowOf(tile, tile.heads[i]); });
          StartOutputs(d, tile, 0, vectors);
        }
        sweep([&](const Tile& tile, size_t k0, size_t k1) {
          WeightValues(d, tile, cache, k0, k1, 0, vectors, widened.get());
        });
      }
    });
    return;
  }

  // Few tiles, long (decode at depth): the same steps, each split over the threads by independent
  // outputs — scores by blocks of keys, softmax by row-head, values by slices of dimensions.
  std::vector<Tile> all;
  for (size_t i = 0; i < tiles; ++i) all.push_back(make_tile(i));
  std::vector<float> probs;
  give_probs(all, probs);
  std::vector<size_t> chunk_start{0};  // tile i's key chunks are jobs chunk_start[i] ..
  std::vector<std::pair<const Tile*, const RowHead*>> row_heads;
  for (const Tile& tile : all) {
    chunk_start.push_back(chunk_start.back() + (tile.end - tile.base + kSplitKeys - 1) / kSplitKeys);
    for (const RowHead& rh : tile.heads) row_heads.emplace_back(&tile, &rh);
  }
  parallel_for(threads, chunk_start.back(), [&](size_t begin, size_t end) {
    const auto widened = WidenedBuffer(head_dim);
    for (size_t job = begin; job < end; ++job) {
      const size_t i = size_t(std::upper_bound(chunk_start.begin(), chunk_start.end(), job) - chunk_start.begin()) - 1;
      const size_t k0 = all[i].base + (job - chunk_start[i]) * kSplitKeys;
      ScoreKeys(d, all[i], cache, params.scale, k0, std::min(all[i].end, k0 + kSplitKeys), widened.get());
    }
  });
  parallel_for(threads, row_heads.size(), [&](size_t begin, size_t end) {
    Softmaxes(d, end - begin,
              [&](size_t i) { return RowOf(*row_heads[begin + i].first, *row_heads[begin + i].second); });
  });
  const size_t slice = std::max<size_t>(1, kSplitDims / kLanesF), slices = (vectors + slice - 1) / slice;
  parallel_for(threads, tiles * slices, [&](size_t begin, size_t end) {
    const auto widened = WidenedBuffer(head_dim);
    for (size_t job = begin; job < end; ++job) {
      const size_t v0 = job % slices * slice;
      const Tile& tile = all[job / slices];
      StartOutputs(d, tile, v0, std::min(vectors, v0 + slice));
      WeightValues(d, tile, cache, tile.base, tile.end, v0, std::min(vectors, v0 + slice), widened.get());
    }
  });
}

#else
void Attention(const float* q, std::span<const ref::AttentionRow> rows, const ref::KVLayerView& cache, size_t heads,
               const ref::AttentionParams& params, float* out, int threads) {
  ref::attention(q, rows, cache, heads, params, out, threads);
}
#endif  // DITTO_SIMD_HAS_FMA
}  // namespace ditto::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ditto::kernels {

HWY_EXPORT(Attention);

void attention(const float* q, std::span<const ref::AttentionRow> rows, const ref::KVLayerView& cache, size_t heads,
               const ref::AttentionParams& params, float* out, int threads) {
  HWY_DYNAMIC_DISPATCH(Attention)(q, rows, cache, heads, params, out, threads);
}

}  // namespace ditto::kernels
#endif
