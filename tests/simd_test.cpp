// Every SIMD kernel, on every target this CPU supports, against its scalar reference: equal
// bits on random data and awkward shapes (1, primes, sizes that are not multiples of the
// vector width or of the 16-output panel).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/kernels.h"
#include "simd_targets.h"
#include "tensor/limits.h"
#include "test_checkpoint.h"

namespace ditto {
namespace {

using testing::for_each_target;

std::vector<float> random_floats(size_t count, uint64_t seed, float scale = 1.0f) {
  testing::SplitMix64 rng(seed);
  std::vector<float> values(count);
  for (auto& v : values) v = rng.uniform(scale);
  return values;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Simd, TheBestTargetIsUsedByDefault) {
  const auto targets = hwy::SupportedAndGeneratedTargets();
  EXPECT_EQ(kernels::target_name(), hwy::TargetName(targets.front()));
  std::printf("SIMD targets: ");
  for (const int64_t t : targets) std::printf("%s ", hwy::TargetName(t));
  std::printf("\n");
}

// Packs rows x k weights given as `source` bytes of `dtype` and requires every target and
// thread count to give the reference's bits for `rows` random input rows.
void expect_matmul_matches_reference(DType dtype, const std::vector<unsigned char>& source, size_t n, size_t k,
                                     size_t rows) {
  const auto w = PackedMatrix::pack(dtype, n, k, source.data());
  testing::expect_matmul_matches_reference(w.view(), random_floats(rows * k, rows * 7 + k, 3.0f), rows, dtype_name(dtype));
}

TEST(Simd, MatmulMatchesReference) {
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (size_t rows : {1, 2, 3, 5, 8, 9, 17, 33}) {
      for (auto [n, k] : std::vector<std::pair<size_t, size_t>>{{1, 1}, {16, 16}, {17, 3}, {31, 100}, {48, 257},
                                                                 {100, 37}, {64, 513}, {97, 300}}) {
        std::vector<unsigned char> source(n * k * dtype_size(dtype));
        const auto values = random_floats(n * k, n * 1000 + k);
        for (size_t i = 0; i < n * k; ++i) store_from_f32(source.data(), dtype, i, values[i]);
        expect_matmul_matches_reference(dtype, source, n, k, rows);
      }
    }
  }
}

// Quantised weights: random blocks (finite scales), inputs that span several blocks of the
// prefill kernel, and decode (one row) as well as prefill. One test per type, so that ctest -j
// runs them side by side.
class QuantisedMatmul : public ::testing::TestWithParam<DType> {};

INSTANTIATE_TEST_SUITE_P(Simd, QuantisedMatmul, ::testing::ValuesIn(kQuantizedDTypes),
                         [](const auto& info) { return dtype_name(info.param); });

TEST_P(QuantisedMatmul, MatchesReference) {
  const DType dtype = GetParam();
  // Up to a row tile's rows (6 on AVX2, 8 on AVX-512) the tiles dequantise in registers, up to 16
  // with AVX-512 a tile of all the rows does, beyond that a block of 2048 inputs at a time; the
  // last shape spans two such blocks. Inputs are whole blocks (of 256 for K-quants).
  const size_t block = dtype_block_elements(dtype);
  for (size_t rows : {1, 2, 5, 6, 7, 8, 9, 16, 17, 70}) {
    for (auto [n, inputs] : std::vector<std::pair<size_t, size_t>>{{1, 32}, {17, 64}, {50, 288}, {33, 544}, {20, 2080}}) {
      const size_t k = (inputs + block - 1) / block * block;
      const auto source = testing::random_quant_blocks(dtype, n * k, n * 31 + k, 1.0f);
      expect_matmul_matches_reference(dtype, source, n, k, rows);
    }
  }
}

// ... and with f16 scales and minimums of every finite magnitude: signed zeros, subnormals, up
// to 65504 (weights up to about 1.3e8), in every path.
TEST(Simd, QuantisedMatmulWithExtremeScalesMatchesReference) {
  for (DType dtype : kQuantizedDTypes) {
    const size_t n = 33, k = 3 * dtype_block_elements(dtype);
    const auto source = testing::random_quant_blocks(dtype, n * k, 5, 0.0f, true);
    for (size_t rows : {1, 3, 12, 17}) expect_matmul_matches_reference(dtype, source, n, k, rows);
  }
}

// ... and with NaN minimums of either sign (an f16 factor a file may hold), one block of them in
// each output: the reference's NaN, product minus the minimum, in every path. (Two NaNs of other
// bits meeting in one fma give either, as the instruction form a compiler picks has it.)
TEST(Simd, QuantisedMatmulWithNaNMinimumsMatchesReference) {
  for (DType dtype : kQuantizedDTypes) {
    const size_t n = 33, k = 3 * dtype_block_elements(dtype);
    auto source = testing::random_quant_blocks(dtype, n * k, 11, 1.0f);
    if (!testing::set_nan_minimums(dtype, source)) continue;
    for (size_t rows : {1, 3, 12, 17}) expect_matmul_matches_reference(dtype, source, n, k, rows);
  }
}


// matmuls(): several matrices of one input, in one hand-off, give each matrix the bits of its
// own reference matmul — in the int8 numerics with two group sizes (inputs rounded once for
// each), in the exact one with dense and quantised matrices (every path), and with both numerics
// in one call; ragged panels, decode and prefill, 1 and 3 threads, every target.
TEST(Simd, MatmulsOfOneInputMatchTheReferenceOfEachMatrix) {
  const size_t k = 256;
  const auto quantised = [&](DType dtype, size_t n, Numerics numerics) {
    return PackedMatrix::pack(dtype, n, k, testing::random_quant_blocks(dtype, n * k, n + size_t(dtype), 1.0f).data(), {},
                              numerics);
  };
  std::vector<unsigned char> dense(50 * k * dtype_size(DType::F16));
  const auto values = random_floats(50 * k, 11);
  for (size_t i = 0; i < values.size(); ++i) store_from_f32(dense.data(), DType::F16, i, values[i]);
  std::vector<PackedMatrix> int8, exact, both;
  int8.push_back(quantised(DType::Q4_K, 17, Numerics::Int8));
  int8.push_back(quantised(DType::Q6_K, 50, Numerics::Int8));
  int8.push_back(quantised(DType::Q8_0, 129, Numerics::Int8));
  exact.push_back(quantised(DType::Q4_1, 33, Numerics::Exact));
  exact.push_back(PackedMatrix::pack(DType::F16, 50, k, dense.data()));
  exact.push_back(quantised(DType::Q6_K, 17, Numerics::Exact));
  both.push_back(quantised(DType::Q4_K, 17, Numerics::Int8));
  both.push_back(quantised(DType::Q4_K, 33, Numerics::Exact));
  for (const auto* matrices : {&int8, &exact, &both})
    for (size_t rows : {1, 5, 12, 17, 70}) {
      const auto x = random_floats(rows * k, rows, 3.0f);
      std::vector<std::vector<float>> expected;
      for (const PackedMatrix& w : *matrices) {
        expected.emplace_back(rows * w.view().rows);
        (w.view().numerics == Numerics::Int8 ? ref::matmul_int8 : ref::matmul)(x.data(), rows, w.view(),
                                                                                 expected.back().data(), 1);
      }
      for_each_target([&] {
        for (int threads : {1, 3}) {
          std::vector<std::vector<float>> got;
          std::vector<kernels::MatmulJob> jobs;
          for (const PackedMatrix& w : *matrices) got.emplace_back(rows * w.view().rows, -1.0f);
          for (size_t j = 0; j < matrices->size(); ++j) jobs.push_back({(*matrices)[j].view(), got[j].data()});
          kernels::matmuls(x.data(), rows, jobs, threads);
          for (size_t j = 0; j < jobs.size(); ++j)
            EXPECT_TRUE(same_bits(got[j], expected[j]))
                << "matrix " << j << " of " << jobs.size() << " (" << dtype_name(jobs[j].w.dtype) << "), rows " << rows
                << ", threads " << threads;
        }
      });
    }
}
TEST(Simd, RmsNormMatchesReference) {
  for (size_t n : {1, 3, 15, 16, 17, 40, 100, 1024, 1031}) {
    const auto x = random_floats(3 * n, n, 4.0f);
    const auto weight = random_floats(n, n + 1);
    std::vector<float> expected(3 * n), got(3 * n);
    ref::rmsnorm(x.data(), 3, n, weight.data(), 1e-6f, expected.data());
    for_each_target([&] {
      kernels::rmsnorm(x.data(), 3, n, weight.data(), 1e-6f, got.data());
      ASSERT_TRUE(same_bits(got, expected)) << "n " << n;
      std::vector<float> in_place = x;
      kernels::rmsnorm(in_place.data(), 3, n, weight.data(), 1e-6f, in_place.data());
      ASSERT_TRUE(same_bits(in_place, expected)) << "in place, n " << n;
    });
  }
}

TEST(Simd, RopeMatchesReference) {
  for (size_t head_dim : {2, 6, 16, 24, 64, 128}) {
    std::vector<float> inv_freq(head_dim / 2), cos(head_dim / 2), sin(head_dim / 2);
    ref::rope_inverse_frequencies(1000000.0, head_dim, inv_freq.data());
    ref::rope_angles(inv_freq.data(), head_dim / 2, 977, cos.data(), sin.data());
    const auto x = random_floats(5 * head_dim, head_dim, 2.0f);
    auto expected = x;
    ref::rope(expected.data(), 5, head_dim, cos.data(), sin.data());
    for_each_target([&] {
      auto got = x;
      kernels::rope(got.data(), 5, head_dim, cos.data(), sin.data());
      ASSERT_TRUE(same_bits(got, expected)) << "head_dim " << head_dim;
    });
  }
}

// RoPE's angles: counts around the f64 vector (4 lanes with AVX2, 8 with AVX-512) with tails and
// without, two bases, positions from 0 to the largest a model may have, so that the angles go
// round every quadrant many times.
TEST(Simd, RopeAnglesMatchReference) {
  for (size_t count : {1, 3, 4, 7, 8, 9, 32, 67, 128}) {
    for (double theta : {10000.0, 1000000.0}) {
      std::vector<float> inv_freq(count);
      ref::rope_inverse_frequencies(theta, 2 * count, inv_freq.data());
      for (size_t position : {size_t(0), size_t(1), size_t(2), size_t(977), size_t(65535),
                              size_t(limits::kPositions.max - 1)}) {
        std::vector<float> expected_cos(count), expected_sin(count), cos(count), sin(count);
        ref::rope_angles(inv_freq.data(), count, position, expected_cos.data(), expected_sin.data());
        for_each_target([&] {
          kernels::rope_angles(inv_freq.data(), count, position, cos.data(), sin.data());
          ASSERT_TRUE(same_bits(cos, expected_cos) && same_bits(sin, expected_sin))
              << "count " << count << ", theta " << theta << ", position " << position;
        });
      }
    }
  }
}

// The KV cache's rounding of a position's keys and values: every dtype, head sizes with tails
// (1, 7, 131) and without, one kv head or three, from random bit patterns (NaNs with payloads,
// infinities, subnormals of f32 and of f16) and the values each rounding treats apart: f16's
// largest finite value, the value just below halfway from it to infinity and the halfway point
// (which rounds to infinity), its smallest subnormal and half of it (a tie to even: zero), bf16
// ties either way and its rounding to infinity. Only the slot written changes; the bytes around it
// keep their filler.
TEST(Simd, KvWriteMatchesReference) {
  const std::vector<uint32_t> specials{0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                                       0xffbfffffu, 0x477fe000u, 0x477fefffu, 0x477ff000u, 0x33800000u, 0x33000000u,
                                       0x33000001u, 0x00000001u, 0x807fffffu, 0x3f808000u, 0x3f818000u, 0x7f7fffffu,
                                       0x387fc000u, 0xb8800000u};
  testing::SplitMix64 rng(59);
  for (DType dtype : {DType::F32, DType::F16, DType::BF16})
    for (size_t kv_heads : {1, 3})
      for (size_t head_dim : {1, 7, 16, 24, 48, 128, 131}) {
        const size_t width = kv_heads * head_dim;
        std::vector<float> keys(width), values(width);
        for (size_t i = 0; i < width; ++i) {
          const uint32_t key_bits = i < specials.size() ? specials[i] : uint32_t(rng.next());
          const uint32_t value_bits = i < specials.size() ? specials[specials.size() - 1 - i] : uint32_t(rng.next());
          keys[i] = f32_from_bits(key_bits);
          values[i] = f32_from_bits(value_bits);
        }
        ref::KVLayerView view{dtype, kv_heads, head_dim, 5, nullptr, nullptr};
        std::vector<unsigned char> expected_k(3 * view.block_bytes(), 0xab), expected_v = expected_k;
        std::vector<unsigned char> got_k = expected_k, got_v = expected_k;
        view.k = expected_k.data();
        view.v = expected_v.data();
        view.write(1, 2, keys.data(), values.data());
        for_each_target([&] {
          std::fill(got_k.begin(), got_k.end(), 0xab);
          std::fill(got_v.begin(), got_v.end(), 0xab);
          view.k = got_k.data();
          view.v = got_v.data();
          kernels::write_kv(view, 1, 2, keys.data(), values.data());
          ASSERT_EQ(got_k, expected_k) << dtype_name(dtype) << " kv heads " << kv_heads << " head_dim " << head_dim;
          ASSERT_EQ(got_v, expected_v) << dtype_name(dtype) << " kv heads " << kv_heads << " head_dim " << head_dim;
        });
      }
}

// Random gates, then the extremes: exp overflow, underflow into subnormals, infinities and NaN
// go through the same lanes; the tails of 1 and 7 values run the scalar code.
// The threads split long inputs (from 8,192 values): those run on 1 and 3 threads.
using GatedActivation = void (*)(const float* gate, const float* up, size_t n, float* out);
using ThreadedActivation = void (*)(const float* gate, const float* up, size_t n, float* out, int threads);
void expect_activation_matches_reference(GatedActivation reference, ThreadedActivation simd, std::vector<float> gate) {
  const auto repeated = gate;
  while (gate.size() < 3 * 4096 + 5) gate.insert(gate.end(), repeated.begin(), repeated.end());
  for (float special : {-200.0f, -103.9f, -90.0f, 88.0f, 89.0f, 200.0f, INFINITY, -INFINITY, NAN, 0.0f, -0.0f})
    gate.push_back(special);
  const auto up = random_floats(gate.size(), 6);
  std::vector<float> expected(gate.size());
  reference(gate.data(), up.data(), gate.size(), expected.data());
  for_each_target([&] {
    for (size_t n : {size_t(1), size_t(7), size_t(1001), gate.size()})
      for (int threads : {1, 3}) {
        std::vector<float> got(n);
        simd(gate.data() + gate.size() - n, up.data() + gate.size() - n, n, got.data(), threads);
        ASSERT_EQ(std::memcmp(got.data(), expected.data() + gate.size() - n, n * sizeof(float)), 0)
            << "n " << n << ", threads " << threads;
      }
  });
}

TEST(Simd, SiluMulMatchesReferenceIncludingExtremes) {
  expect_activation_matches_reference(ref::silu_mul, kernels::silu_mul, random_floats(1001, 5, 20.0f));
}

TEST(Simd, GeluTanhMulMatchesReferenceIncludingExtremes) {
  // Most gates within +-3, where tanh's two branches meet (|inner| = 0.625 at |g| ~ 0.74).
  auto gate = random_floats(1001, 7, 3.0f);
  const auto wide = random_floats(200, 8, 60.0f);
  gate.insert(gate.end(), wide.begin(), wide.end());
  for (float g : {0.7401f, 0.7402f, 0.7403f, -0.7402f, 1e-30f, -1e-40f}) gate.push_back(g);
  expect_activation_matches_reference(ref::gelu_tanh_mul, kernels::gelu_tanh_mul, gate);
}

TEST(Simd, SoftcapMatchesReference) {
  auto x = random_floats(1003, 9, 200.0f);
  for (float special : {0.0f, -0.0f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN}) x.push_back(special);
  for (float cap : {30.0f, 15.0f, 0.7f}) {
    auto expected = x;
    ref::softcap(expected.data(), expected.size(), cap);
    for_each_target([&] {
      for (size_t n : {size_t(1), size_t(7), x.size()}) {
        std::vector<float> got(x.end() - ptrdiff_t(n), x.end());
        kernels::softcap(got.data(), n, cap);
        ASSERT_EQ(std::memcmp(got.data(), expected.data() + x.size() - n, n * sizeof(float)), 0) << "n " << n;
      }
    });
  }
}

// A paged cache for kernel tests: `sequences` sequences of `lengths[i]` positions with random
// keys and values, their blocks scattered over the pool in a shuffled order.
struct PagedCache {
  std::vector<unsigned char> k, v;
  ref::KVLayerView view;
  std::vector<std::vector<uint32_t>> tables;

  PagedCache(DType dtype, size_t kv_heads, size_t head_dim, size_t block_size, const std::vector<size_t>& lengths,
             uint64_t seed) {
    size_t blocks = 0;
    for (size_t length : lengths) blocks += (length + block_size - 1) / block_size;
    std::vector<uint32_t> order(blocks);
    for (size_t b = 0; b < blocks; ++b) order[b] = uint32_t(b);
    testing::SplitMix64 rng(seed);
    for (size_t b = blocks; b > 1; --b) std::swap(order[b - 1], order[rng.next() % b]);
    view = {dtype, kv_heads, head_dim, block_size, nullptr, nullptr};
    k.resize(blocks * view.block_bytes());
    v.resize(blocks * view.block_bytes());
    view.k = k.data();
    view.v = v.data();
    size_t next = 0;
    for (size_t s = 0; s < lengths.size(); ++s) {
      tables.emplace_back(order.begin() + ptrdiff_t(next), order.begin() + ptrdiff_t(next + (lengths[s] + block_size - 1) / block_size));
      next += tables.back().size();
      const auto keys = random_floats(lengths[s] * kv_heads * head_dim, seed + 2 * s, 3.0f);
      const auto values = random_floats(lengths[s] * kv_heads * head_dim, seed + 2 * s + 1, 2.0f);
      for (size_t p = 0; p < lengths[s]; ++p)
        view.write(tables[s][p / block_size], p % block_size, &keys[p * kv_heads * head_dim],
                   &values[p * kv_heads * head_dim]);
    }
  }
};

// Requires every target and each of `thread_counts` to give the reference's bits for the
// attention of `rows` over `cache`; `what` names the case in a failure.
void expect_attention_matches_reference(const std::vector<float>& q, std::span<const ref::AttentionRow> rows,
                                        const ref::KVLayerView& cache, size_t heads,
                                        const ref::AttentionParams& params, std::initializer_list<int> thread_counts,
                                        const std::string& what) {
  std::vector<float> expected(q.size());
  ref::attention(q.data(), rows, cache, heads, params, expected.data(), 1);
  for_each_target([&] {
    for (int threads : thread_counts) {
      std::vector<float> got(q.size());
      kernels::attention(q.data(), rows, cache, heads, params, got.data(), threads);
      ASSERT_TRUE(same_bits(got, expected)) << what << " threads " << threads;
    }
  });
}

TEST(Simd, AttentionMatchesReference) {
  struct Shape {
    size_t heads, kv_heads, head_dim, first_pos, rows;
  };
  for (DType cache_dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (Shape s : {Shape{1, 1, 16, 0, 1}, Shape{4, 2, 64, 0, 37}, Shape{8, 2, 128, 19, 13}, Shape{3, 1, 32, 100, 1},
                    Shape{2, 2, 24, 5, 7}, Shape{6, 3, 48, 16, 17}}) {
      // Windows: none, one key, shorter than a block, across blocks, longer than every row.
      for (const auto& block_and_window : {std::pair<size_t, size_t>{1, 0}, {5, 0}, {16, 0}, {5, 1}, {5, 3}, {16, 7},
                                           {16, 21}, {1, 1000}}) {
        const size_t block_size = block_and_window.first, window = block_and_window.second;
        // Two sequences: one prefilling `rows` rows after first_pos, one decoding at a prime depth.
        const PagedCache cache(cache_dtype, s.kv_heads, s.head_dim, block_size, {s.first_pos + s.rows, 23}, 11);
        std::vector<ref::AttentionRow> rows;
        for (size_t t = 0; t < s.rows; ++t) rows.push_back({cache.tables[0].data(), s.first_pos + t});
        rows.push_back({cache.tables[1].data(), 22});
        const auto q = random_floats(rows.size() * s.heads * s.head_dim, 13, 3.0f);
        const ref::AttentionParams params{ref::AttentionParams::inverse_sqrt_scale(double(s.head_dim)), window};
        expect_attention_matches_reference(q, rows, cache.view, s.heads, params, {1, 2, 4},
                                           dtype_name(cache_dtype) + " heads " + std::to_string(s.heads) +
                                               " head_dim " + std::to_string(s.head_dim) + " rows " +
                                               std::to_string(s.rows) + " block " + std::to_string(block_size) +
                                               " window " + std::to_string(window));
      }
    }
  }
}

// The tiled kernel on the shapes it cuts work by: tiles of 128 row-heads (so 128 rows for one head
// per kv head, 16 for MQA's eight), register tiles of 4 row-heads (and of 6 for AVX2's values),
// blocks of 32 and 64 keys, chunks of 256 keys when tiles are fewer than twice the threads and
// one sees more than 256 keys (decode at depth), none of them dividing the shapes here; head
// sizes 64, 128, 256; GQA groups of 1, 2, 7 and MQA; windows; rows of two sequences interleaved
// (each a run of its own) or one after the other.
TEST(Simd, AttentionTilesAndSplitsMatchReference) {
  struct Shape {
    size_t heads, kv_heads, head_dim, first_pos, rows;
    bool interleaved;
  };
  for (DType cache_dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (Shape s : {Shape{4, 4, 64, 0, 70, true}, Shape{4, 2, 64, 0, 70, false}, Shape{14, 2, 128, 300, 9, false},
                    Shape{8, 1, 256, 290, 11, false}, Shape{2, 1, 128, 511, 1, false}, Shape{16, 8, 128, 257, 3, true}}) {
      for (size_t window : {size_t(0), size_t(100)}) {
        const size_t length = s.first_pos + s.rows;
        const PagedCache cache(cache_dtype, s.kv_heads, s.head_dim, 16, {length, length}, 29);
        // Sequence 0 prefills `rows` rows, sequence 1 every other of the same positions.
        std::vector<ref::AttentionRow> rows;
        for (size_t t = 0; t < s.rows; ++t) rows.push_back({cache.tables[0].data(), s.first_pos + t});
        for (size_t t = 0; t < s.rows; t += 2)
          rows.insert(s.interleaved ? rows.begin() + ptrdiff_t(t + t / 2 + 1) : rows.end(),
                      {cache.tables[1].data(), s.first_pos + t});
        const auto q = random_floats(rows.size() * s.heads * s.head_dim, 31, 3.0f);
        const ref::AttentionParams params{ref::AttentionParams::inverse_sqrt_scale(double(s.head_dim)), window};
        // Tiles of up to 128 row-heads for one thread (70 rows of two heads a kv head: a whole one
        // and a part); for two and five, tiles of fewer rows so that there are twice as many as
        // threads, or where even rows of one are too few, splits.
        expect_attention_matches_reference(q, rows, cache.view, s.heads, params, {1, 2, 5},
                                           dtype_name(cache_dtype) + " heads " + std::to_string(s.heads) + "/" +
                                               std::to_string(s.kv_heads) + " head_dim " + std::to_string(s.head_dim) +
                                               " rows " + std::to_string(s.rows) + " from " +
                                               std::to_string(s.first_pos) + " window " + std::to_string(window));
      }
    }
  }
}

// Decode steps (one row per sequence), whose jobs sweep a sequence's kv heads side by side,
// cache block by cache block: one sequence or several, kv heads that the threads' groups divide
// or not (GQA, MHA, MQA), blocks that do not divide the depth, windows, thread counts that
// split the kv heads or not.
TEST(Simd, AttentionDecodeSweepsMatchReference) {
  struct Shape {
    size_t heads, kv_heads, head_dim;
  };
  for (DType cache_dtype : {DType::F16}) {  // the other types read rows the same way (TilesAndSplits)
    for (Shape s : {Shape{16, 8, 128}, Shape{6, 6, 64}, Shape{8, 1, 256}, Shape{12, 3, 64}}) {
      for (size_t block_size : {size_t(16), size_t(5)}) {
        const std::vector<size_t> lengths{301, 1, 37};
        const PagedCache cache(cache_dtype, s.kv_heads, s.head_dim, block_size, lengths, 41);
        for (size_t sequences : {size_t(1), lengths.size()}) {
          std::vector<ref::AttentionRow> rows;
          for (size_t i = 0; i < sequences; ++i) rows.push_back({cache.tables[i].data(), lengths[i] - 1});
          const auto q = random_floats(rows.size() * s.heads * s.head_dim, 43, 3.0f);
          for (size_t window : {size_t(0), size_t(100)}) {
            const ref::AttentionParams params{ref::AttentionParams::inverse_sqrt_scale(double(s.head_dim)), window};
            expect_attention_matches_reference(
                q, rows, cache.view, s.heads, params, {1, 2, 3},
                dtype_name(cache_dtype) + " heads " + std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) +
                    " head_dim " + std::to_string(s.head_dim) + " block " + std::to_string(block_size) +
                    " sequences " + std::to_string(sequences) + " window " + std::to_string(window));
          }
        }
      }
    }
  }
}

// Scores spread far apart, so that a vector of shifted scores holds lanes inside [-87, 0] (the
// softmax's one-multiply exp), below it (exp's split scaling, subnormal results) and below -104
// (zero) side by side.
TEST(Simd, AttentionSoftmaxAcrossExpRanges) {
  const size_t heads = 4, kv_heads = 2, head_dim = 64, length = 150;
  const PagedCache cache(DType::F32, kv_heads, head_dim, 16, {length}, 47);
  std::vector<ref::AttentionRow> rows;
  for (size_t t = 0; t < 9; ++t) rows.push_back({cache.tables[0].data(), length - 9 + t});
  for (float spread : {1.0f, 8.0f, 30.0f, 300.0f}) {
    const auto q = random_floats(rows.size() * heads * head_dim, 53, 3.0f * spread);
    const ref::AttentionParams params{ref::AttentionParams::inverse_sqrt_scale(double(head_dim))};
    expect_attention_matches_reference(q, rows, cache.view, heads, params, {2}, "spread " + std::to_string(spread));
  }
}

// Where a sequence's positions lie in the pool, and the block size, change no bit: the order
// of every reduction is the order of positions.
TEST(Simd, AttentionDoesNotDependOnWhereBlocksLie) {
  const size_t heads = 4, kv_heads = 2, head_dim = 32, length = 41;
  const auto q = random_floats(heads * head_dim, 21, 3.0f);
  std::vector<float> first;
  for (size_t block_size : {1, 3, 8, 41, 64})
    // Sequence 0 has the same keys and values in both caches; a second sequence scatters its
    // blocks elsewhere.
    for (const std::vector<size_t>& lengths : {std::vector<size_t>{length}, std::vector<size_t>{length, 7, length}}) {
      const PagedCache cache(DType::F32, kv_heads, head_dim, block_size, lengths, 11);
      const ref::AttentionRow row{cache.tables[0].data(), length - 1};
      const ref::AttentionParams params{ref::AttentionParams::inverse_sqrt_scale(double(head_dim))};
      std::vector<float> out(q.size());
      for_each_target([&] {
        kernels::attention(q.data(), std::span(&row, 1), cache.view, heads, params, out.data(), 2);
        if (first.empty()) first = out;
        ASSERT_TRUE(same_bits(out, first)) << "block size " << block_size << ", sequences " << lengths.size();
      });
    }
}

// A window of W keys means exactly the last W positions: a row at position p with a window
// gives the bits of a row at position W - 1 of a sequence that holds only positions p - W + 1 .. p.
TEST(Simd, AttentionWindowSeesTheLastPositionsOnly) {
  const size_t heads = 4, kv_heads = 2, head_dim = 32, length = 40, window = 13, block_size = 5;
  const PagedCache cache(DType::F32, kv_heads, head_dim, block_size, {length}, 17);
  const size_t first = length - window;
  // The same keys and values, positions first .. length-1 moved to 0 .. window-1.
  PagedCache tail(DType::F32, kv_heads, head_dim, block_size, {window}, 19);
  const size_t row_bytes = head_dim * sizeof(float);
  for (size_t i = 0; i < window; ++i)
    for (size_t h = 0; h < kv_heads; ++h)
      for (void* ref::KVLayerView::*part : {&ref::KVLayerView::k, &ref::KVLayerView::v}) {
        const size_t j = first + i;
        std::memcpy(static_cast<unsigned char*>(tail.view.*part) +
                        tail.view.offset(tail.tables[0][i / block_size], h, i % block_size),
                    static_cast<const unsigned char*>(cache.view.*part) +
                        cache.view.offset(cache.tables[0][j / block_size], h, j % block_size),
                    row_bytes);
      }
  const auto q = random_floats(heads * head_dim, 23, 3.0f);
  const float scale = ref::AttentionParams::inverse_sqrt_scale(double(head_dim));
  const ref::AttentionRow windowed{cache.tables[0].data(), length - 1}, whole{tail.tables[0].data(), window - 1};
  std::vector<float> expected(q.size()), got(q.size());
  ref::attention(q.data(), std::span(&whole, 1), tail.view, heads, {scale, 0}, expected.data(), 1);
  for_each_target([&] {
    kernels::attention(q.data(), std::span(&windowed, 1), cache.view, heads, {scale, window}, got.data(), 2);
    ASSERT_TRUE(same_bits(got, expected));
  });
  // And the window changes the answer: without it the row sees all 40 positions.
  kernels::attention(q.data(), std::span(&windowed, 1), cache.view, heads, {scale, 0}, got.data(), 2);
  EXPECT_FALSE(same_bits(got, expected));
}

// The sampler's kernels over a row of logits: exact results, so every target must give the
// reference's; sizes around the vector width and the 256-id weight block.
const size_t kRowSizes[] = {1, 2, 7, 15, 16, 17, 31, 255, 256, 257, 1000, 4099};

TEST(Simd, BlockMaxAndFirstIndexMatchReference) {
  for (const size_t n : kRowSizes) {
    auto x = random_floats(n, n, 5.0f);
    x[(n * 7) / 11] = 9.0f;  // the maximum, twice when n allows
    x[n - 1] = 9.0f;
    const size_t blocks = (n + ref::kLogitsBlock - 1) / ref::kLogitsBlock;
    std::vector<float> expected(blocks);
    ASSERT_EQ(ref::block_max(x.data(), n, expected.data()), 9.0f);
    for_each_target([&] {
      std::vector<float> maxima(blocks);
      ASSERT_EQ(kernels::block_max(x.data(), n, maxima.data()), 9.0f) << n;
      ASSERT_TRUE(same_bits(maxima, expected)) << n;
      ASSERT_EQ(kernels::first_index_of(x.data(), n, 9.0f), ref::first_index_of(x.data(), n, 9.0f)) << n;
      ASSERT_EQ(kernels::first_index_of(x.data(), n, 100.0f), n) << n;
      for (const float bad : {NAN, INFINITY, -INFINITY})
        for (const size_t at : {size_t(0), n / 2, n - 1}) {
          auto y = x;
          y[at] = bad;
          ASSERT_TRUE(std::isnan(kernels::block_max(y.data(), n, maxima.data()))) << n << " " << at;
        }
    });
  }
}

TEST(Simd, IndicesInRangeMatchesReference) {
  for (const size_t n : kRowSizes) {
    const auto x = random_floats(n, n + 1, 4.0f);
    for (const auto& range : std::vector<std::pair<float, float>>{
             {-INFINITY, INFINITY}, {-1.0f, INFINITY}, {3.5f, INFINITY}, {x[n / 2], INFINITY}, {10.0f, INFINITY},
             {-1.0f, 1.0f}, {-INFINITY, x[n / 2]}, {x[n / 2], x[n / 2]}, {2.0f, -2.0f}}) {
      const float low = range.first, high = range.second;
      std::vector<uint32_t> expected(n);
      expected.resize(ref::indices_in_range(x.data(), n, low, high, expected.data()));
      for_each_target([&] {
        std::vector<uint32_t> got(n, 12345);
        got.resize(kernels::indices_in_range(x.data(), n, low, high, got.data()));
        ASSERT_EQ(got, expected) << n << " [" << low << ", " << high << ")";
      });
    }
  }
}

// Weights of scaled logits x = (z - max) * inverse_temperature from 0 down past -32 (where
// they reach 0), and x = -inf (a huge inverse temperature).
TEST(Simd, SamplingWeightsMatchReference) {
  for (const size_t n : kRowSizes) {
    auto z = random_floats(n, n + 2, 17.0f);
    z[n / 3] = 17.0f;
    for (const float inverse_temperature : {1.0f, 0.37f, 3.0f, 1e30f}) {
      std::vector<uint64_t> expected(n);
      ref::sampling_weights(z.data(), n, 17.0f, inverse_temperature, expected.data());
      const uint64_t expected_sum = ref::sum_of_weights(z.data(), n, 17.0f, inverse_temperature);
      EXPECT_GE(expected_sum, uint64_t(1) << ref::kWeightBits);
      for_each_target([&] {
        std::vector<uint64_t> got(n);
        kernels::sampling_weights(z.data(), n, 17.0f, inverse_temperature, got.data());
        ASSERT_EQ(got, expected) << n << " " << inverse_temperature;
        ASSERT_EQ(kernels::sum_of_weights(z.data(), n, 17.0f, inverse_temperature), expected_sum) << n;
      });
    }
  }
}

}  // namespace
}  // namespace ditto
