// The int8 numerics (docs/numerics-quant.md): the rounding of inputs to int8 at its edges, the
// packing, the reference matmul against the function it stands for, and every SIMD target
// against the reference bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "simd_targets.h"
#include "test_checkpoint.h"

namespace ditto {
namespace {

using testing::for_each_target;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_floats(size_t count, uint64_t seed, float scale) {
  testing::SplitMix64 rng(seed);
  std::vector<float> values(count);
  for (auto& v : values) v = rng.uniform(scale);
  return values;
}

bool same_bits(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

// A block of 32 inputs: `values` first, the rest 0.
std::vector<float> block_of(std::initializer_list<float> values) {
  std::vector<float> block(kInt8Block, 0.0f);
  std::copy(values.begin(), values.end(), block.begin());
  return block;
}

struct Quantised {
  float scale;
  std::vector<int> values;
};
Quantised quantise(const std::vector<float>& block) {
  int8_t q[kInt8Block];
  std::memset(q, 0x55, sizeof(q));
  const float scale = ref::quantize_block(block.data(), q);
  return {scale, std::vector<int>(q, q + kInt8Block)};
}

TEST(Int8Rounding, TiesGoToEven) {
  // The largest magnitude 127 makes the scale exactly 1, so x / scale is x.
  const auto q = quantise(block_of({127.0f, 2.5f, 3.5f, -2.5f, -3.5f, 0.5f, -0.5f, 1.5f, 126.5f, 2.4999998f, -127.0f}));
  EXPECT_EQ(q.scale, 1.0f);
  const std::vector<int> expected = {127, 2, 4, -2, -4, 0, 0, 2, 126, 2, -127};
  EXPECT_EQ(std::vector<int>(q.values.begin(), q.values.begin() + 11), expected);
  for (size_t i = 11; i < kInt8Block; ++i) EXPECT_EQ(q.values[i], 0);
}

TEST(Int8Rounding, TheLargestMagnitudeBecomesPlusOrMinus127NeverMinus128) {
  for (const float largest : {1.0f, 3.0f, 1e-30f, 12345.678f, std::numeric_limits<float>::max()}) {
    const auto q = quantise(block_of({largest / 3, -largest, largest / 2}));
    EXPECT_EQ(q.scale, largest / 127.0f);
    EXPECT_EQ(q.values[1], -127) << largest;
    const auto positive = quantise(block_of({largest}));
    EXPECT_EQ(positive.values[0], 127) << largest;
  }
}

TEST(Int8Rounding, AllZerosHaveScaleZero) {
  for (const float zero : {0.0f, -0.0f}) {
    const auto q = quantise(std::vector<float>(kInt8Block, zero));
    EXPECT_EQ(f32_bits(q.scale), 0u);
    for (int v : q.values) EXPECT_EQ(v, 0);
  }
}

TEST(Int8Rounding, InfinityOrNaNMakesTheScaleNaNAndTheValuesZero) {
  for (const float bad : {kNaN, kInf, -kInf, -kNaN}) {
    const auto q = quantise(block_of({1.0f, 2.0f, bad, 3.0f}));
    EXPECT_TRUE(std::isnan(q.scale)) << bad;
    for (int v : q.values) EXPECT_EQ(v, 0);
  }
}

TEST(Int8Rounding, Subnormals) {
  const float tiny = std::numeric_limits<float>::denorm_min();  // 2^-149
  // 63 * 2^-149 / 127 rounds to 0: the block counts as zeros.
  EXPECT_EQ(quantise(block_of({63 * tiny, tiny})).scale, 0.0f);
  for (int v : quantise(block_of({63 * tiny, tiny})).values) EXPECT_EQ(v, 0);
  // 64 * 2^-149 / 127 rounds up to 2^-149: the values are the multiples of 2^-149 themselves.
  const auto q = quantise(block_of({64 * tiny, -5 * tiny, tiny}));
  EXPECT_EQ(q.scale, tiny);
  EXPECT_EQ(q.values[0], 64);
  EXPECT_EQ(q.values[1], -5);
  EXPECT_EQ(q.values[2], 1);
  // 190 * 2^-149 / 127 rounds down to 2^-149: 190 is clamped to 127.
  const auto clamped = quantise(block_of({190 * tiny, -150 * tiny, 100 * tiny}));
  EXPECT_EQ(clamped.scale, tiny);
  EXPECT_EQ(clamped.values[0], 127);
  EXPECT_EQ(clamped.values[1], -127);
  EXPECT_EQ(clamped.values[2], 100);
  // Subnormal inputs beside a normal largest one round to 0.
  const auto beside = quantise(block_of({1.0f, tiny, -1e-40f}));
  EXPECT_EQ(beside.values[1], 0);
  EXPECT_EQ(beside.values[2], 0);
}

TEST(Int8Rounding, RowsHoldTheSumsOfEachGroup) {
  std::vector<float> x = block_of({127.0f, 1.0f, 2.0f, -3.0f});
  x[16] = 5.0f, x[31] = -7.0f;
  for (const size_t group : {size_t(16), size_t(32)}) {
    ref::Int8Rows rows;
    ref::quantize_rows(x.data(), 1, kInt8Block, group, rows);
    ASSERT_EQ(rows.sums.size(), kInt8Block / group);
    if (group == 32) {
      EXPECT_EQ(rows.sums[0], 127 + 1 + 2 - 3 + 5 - 7);
    } else {
      EXPECT_EQ(rows.sums[0], 127 + 1 + 2 - 3);
      EXPECT_EQ(rows.sums[1], 5 - 7);
    }
    for (size_t g = 0; g < rows.sums.size(); ++g) EXPECT_EQ(rows.scaled_sums[g], float(rows.sums[g]) * rows.scales[0]);
  }
}

// Rows of inputs that meet every rule: random blocks, and blocks of zeros, NaN, infinity,
// subnormals, exact ties and plus and minus the largest magnitude. NaN and infinity only in rows
// 2, 5, 8, ...: a row with either gives NaN outputs, whatever the weights (a matmul with them in
// every row compared NaN with NaN).
std::vector<float> awkward_rows(size_t rows, size_t cols, uint64_t seed) {
  auto x = random_floats(rows * cols, seed, 4.0f);
  const float tiny = std::numeric_limits<float>::denorm_min();
  for (size_t at = 0; at < x.size(); at += kInt8Block) {
    float* block = &x[at];
    const bool non_finite = at / cols % 3 == 2;
    switch (at / kInt8Block % 8) {
      case 1: std::fill(block, block + kInt8Block, 0.0f); break;
      case 2:
        if (non_finite) block[at % 31] = kNaN;
        break;
      case 3:
        if (non_finite) block[5] = -kInf;
        break;
      case 4:
        for (size_t i = 0; i < kInt8Block; ++i) block[i] = float(int(i) * 37 % 190 - 95) * tiny;
        break;
      case 5:  // scale 1, halves everywhere
        for (size_t i = 0; i < kInt8Block; ++i) block[i] = float(int(i) - 16) + 0.5f;
        block[0] = -127.0f;
        break;
      case 6:
        for (size_t i = 0; i < kInt8Block; ++i) block[i] = i % 2 ? 3.0f : -3.0f;  // all +-127
        break;
      default: break;
    }
  }
  return x;
}

TEST(Int8Rounding, EveryTargetRoundsAsTheReference) {
  for (const size_t group : {size_t(16), size_t(32)})
    for (const auto& shape : std::vector<std::pair<size_t, size_t>>{{1, 32}, {3, 256}, {17, 96}}) {
      const size_t rows = shape.first, cols = shape.second;  // named, not bound: lambdas capture them
      const auto x = awkward_rows(rows, cols, rows + cols);
      ref::Int8Rows expected;
      ref::quantize_rows(x.data(), rows, cols, group, expected);
      for_each_target([&] {
        for (int threads : {1, 3}) {
          ref::Int8Rows got;
          kernels::quantize_rows(x.data(), rows, cols, group, got, 2, threads);
          ASSERT_EQ(got.rows, rows);
          EXPECT_TRUE(same_bits(got.values.data(), expected.values.data(), rows * cols));
          EXPECT_TRUE(same_bits(got.scales.data(), expected.scales.data(), expected.scales.size() * 4));
          EXPECT_TRUE(same_bits(got.sums.data(), expected.sums.data(), expected.sums.size() * 4));
          EXPECT_TRUE(same_bits(got.scaled_sums.data(), expected.scaled_sums.data(), expected.scaled_sums.size() * 4));
          for (size_t i = rows * cols; i < got.values.size(); ++i) ASSERT_EQ(got.values[i], 0) << "padding";
        }
      });
    }
}

PackedMatrix pack_int8(DType dtype, const std::vector<unsigned char>& source, size_t n, size_t k) {
  return PackedMatrix::pack(dtype, n, k, source.data(), {}, Numerics::Int8);
}

// The int8 packing holds the same weights as the exact one: entries, scales, minimums.
TEST(Int8Packing, HoldsTheEntriesScalesAndMinimumsOfTheExactPacking) {
  for (DType dtype : kQuantizedDTypes) {
    const size_t n = 21, k = 2 * dtype_block_elements(dtype), group = quant_group_size(dtype);
    const auto source = testing::random_quant_blocks(dtype, n * k, 3, 0.0f, true);
    const auto exact = PackedMatrix::pack(dtype, n, k, source.data());
    const auto int8 = pack_int8(dtype, source, n, k);
    ASSERT_EQ(int8.view().numerics, Numerics::Int8);
    for (size_t row = 0; row < n; ++row)
      for (size_t col = 0; col < k; ++col) {
        ASSERT_EQ(int8.view().entry(row, col), exact.view().entry(row, col)) << dtype_name(dtype) << " " << row << " " << col;
        ASSERT_EQ(f32_bits(int8.view().at(row, col)), f32_bits(exact.view().at(row, col))) << dtype_name(dtype);
        if (col % group == 0) {
          ASSERT_EQ(f32_bits(int8.view().group_scale(row, col / group)), f32_bits(exact.view().group_scale(row, col / group)));
          ASSERT_EQ(f32_bits(int8.view().group_minimum(row, col / group)),
                    f32_bits(exact.view().group_minimum(row, col / group)));
        }
      }
  }
}

// Decode streams the packed tiles: the 32-input types take the file's bytes, the 5-bit ones too
// (nibbles and a plane of fifth bits, not a byte per entry).
TEST(Int8Packing, TheThirtyTwoInputTypesTakeTheBytesOfTheFile) {
  for (DType dtype : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    const size_t n = 48, k = 8 * kInt8Block;  // (whole 64-byte lines: the packing rounds up to them)
    EXPECT_EQ(PackedMatrix::packed_bytes(dtype, n, k, Numerics::Int8), n * k / kInt8Block * dtype_block_bytes(dtype))
        << dtype_name(dtype);
  }
}

// ... and the K-quants with planes of high bits their scales and minimums as factors, the f16 d
// or dmin and the group's byte: Q5_K 6.5 bits a weight (the file 5.5), Q6_K 7 (6.56), where f32
// scales and minimums took 7 and 8.
TEST(Int8Packing, TheKQuantsWithHighBitsTakeTheirFactorsNotTheirProducts) {
  const std::pair<DType, size_t> tile_bytes[] = {{DType::Q5_K, 416}, {DType::Q6_K, 448}};
  for (auto [dtype, bytes] : tile_bytes) {
    const size_t n = 48, k = 8 * kInt8Block;
    EXPECT_EQ(int8_packing(dtype).scale_field, Int8Field::Factored) << dtype_name(dtype);
    EXPECT_EQ(PackedMatrix::packed_bytes(dtype, n, k, Numerics::Int8), n / kPanelRows * k / kInt8Block * bytes)
        << dtype_name(dtype);
  }
}

// Every f16 bit pattern of a scale or minimum factor (subnormals, infinities, NaN payloads) gives
// the f32 the exact packing holds: the 32-input types keep the file's f16 fields as they are, Q5_K
// and Q6_K the factors of the products, with the blocks' integer factors (random, and every factor
// 0 in a second pass: an infinite factor times 0 is NaN, negated for a minimum term).
TEST(Int8Packing, KeepsEveryF16ScaleAndMinimumBitForBit) {
  for (DType dtype : kQuantizedDTypes) {
    const bool factored = int8_packing(dtype).scale_field == Int8Field::Factored;
    const size_t patterns = 65536, blocks = factored ? 2 * patterns : patterns;
    const size_t n = 16, block = dtype_block_elements(dtype), k = blocks / n * block, block_bytes = dtype_block_bytes(dtype);
    auto source = testing::random_quant_blocks(dtype, n * k, 5, 1.0f);
    const size_t scale_at = testing::f16_scale_at(dtype);
    const int minimum_at = testing::f16_minimum_at(dtype);
    const auto [integers_at, integers] = testing::integer_factors_at(dtype);
    for (size_t b = 0; b < blocks; ++b) {
      unsigned char* at = &source[b * block_bytes];
      const auto scale = uint16_t(b), minimum = uint16_t(~b);
      std::memcpy(at + scale_at, &scale, 2);
      if (minimum_at >= 0) std::memcpy(at + minimum_at, &minimum, 2);
      if (b >= patterns) std::memset(at + integers_at, 0, integers);
    }
    const auto exact = PackedMatrix::pack(dtype, n, k, source.data());
    const auto int8 = pack_int8(dtype, source, n, k);
    const size_t group = quant_group_size(dtype);
    for (size_t row = 0; row < n; ++row)
      for (size_t g = 0; g < k / group; ++g) {
        ASSERT_EQ(f32_bits(int8.view().group_scale(row, g)), f32_bits(exact.view().group_scale(row, g)))
            << dtype_name(dtype) << " " << row << " " << g;
        ASSERT_EQ(f32_bits(int8.view().group_minimum(row, g)), f32_bits(exact.view().group_minimum(row, g)))
            << dtype_name(dtype) << " " << row << " " << g;
      }
  }
}

// The reference computes what the numerics page says: against the same sum in double (each
// group's products exact, its scale and minimum terms rounded once), within the roundings of
// the f32 steps: three per group, each at most 2^-24 of the largest partial sum.
TEST(Int8Matmul, ReferenceIsTheDocumentedFunction) {
  for (DType dtype : kQuantizedDTypes) {
    const size_t n = 19, k = 2 * dtype_block_elements(dtype), group = quant_group_size(dtype), rows = 3;
    const auto source = testing::random_quant_blocks(dtype, n * k, 11, 1.0f);
    const auto w = pack_int8(dtype, source, n, k);
    const auto x = random_floats(rows * k, 5, 2.0f);
    std::vector<float> y(rows * n);
    ref::matmul(x.data(), rows, w.view(), y.data(), 1);
    ref::Int8Rows in;
    ref::quantize_rows(x.data(), rows, k, group, in);
    const double sign = quant_minimum(dtype) == QuantMinimum::Subtracted ? -1.0 : 1.0;
    for (size_t m = 0; m < rows; ++m)
      for (size_t o = 0; o < n; ++o) {
        double sum = 0.0, magnitude = 0.0;
        for (size_t g = 0; g < k / group; ++g) {
          const double block_scale = in.scales[m * in.blocks() + g * group / kInt8Block];
          double product = 0.0, inputs = 0.0;
          for (size_t i = g * group; i < (g + 1) * group; ++i) {
            product += double(in.values[m * k + i]) * w.view().entry(o, i);
            inputs += in.values[m * k + i];
          }
          const double scaled = product * w.view().group_scale(o, g) * block_scale;
          const double shifted = sign * w.view().group_minimum(o, g) * inputs * block_scale;
          sum += scaled + shifted;
          magnitude += std::abs(scaled) + std::abs(shifted);
        }
        const double bound = 3.0 * double(k / group) * magnitude * std::ldexp(1.0, -24);
        EXPECT_LE(std::abs(double(y[m * n + o]) - sum), bound) << dtype_name(dtype) << " row " << m << " output " << o;
      }
  }
}

// ... and that function is the exact one up to the rounding of the inputs: each input moves by
// at most half its block's scale (plus the f32 roundings of both).
TEST(Int8Matmul, ApproximatesTheExactMatmulWithinTheRoundingOfItsInputs) {
  for (DType dtype : kQuantizedDTypes) {
    const size_t n = 16, k = dtype_block_elements(dtype) * 2, rows = 2;
    const auto source = testing::random_quant_blocks(dtype, n * k, 17, 0.5f);
    const auto exact = PackedMatrix::pack(dtype, n, k, source.data());
    const auto int8 = pack_int8(dtype, source, n, k);
    const auto x = random_floats(rows * k, 23, 1.0f);
    std::vector<float> want(rows * n), got(rows * n);
    ref::matmul(x.data(), rows, exact.view(), want.data(), 1);
    ref::matmul(x.data(), rows, int8.view(), got.data(), 1);
    ref::Int8Rows in;
    ref::quantize_rows(x.data(), rows, k, quant_group_size(dtype), in);
    size_t differing = 0;
    for (size_t m = 0; m < rows; ++m)
      for (size_t o = 0; o < n; ++o) {
        double bound = 0.0, magnitude = 0.0;
        for (size_t i = 0; i < k; ++i) {
          const double weight = std::abs(exact.view().at(o, i));
          bound += weight * in.scales[m * in.blocks() + i / kInt8Block] / 2;
          magnitude += weight * (std::abs(x[m * k + i]) + in.scales[m * in.blocks() + i / kInt8Block]);
        }
        bound += 4.0 * double(k) * magnitude * std::ldexp(1.0, -24);
        EXPECT_LE(std::abs(double(got[m * n + o]) - double(want[m * n + o])), bound) << dtype_name(dtype);
        differing += got[m * n + o] != want[m * n + o];
      }
    EXPECT_GT(differing, rows * n / 2) << "the rounding of the inputs shows in most outputs: " << dtype_name(dtype);
  }
}

void expect_simd_matches_reference(DType dtype, const std::vector<unsigned char>& source, size_t n, size_t k,
                                   const std::vector<float>& x, size_t rows) {
  testing::expect_matmul_matches_reference(pack_int8(dtype, source, n, k).view(), x, rows, "int8 " + dtype_name(dtype));
}

// Every target, every type: 1 row (decode) to 33, ragged panels and panel groups, one block to many.
TEST(Int8Matmul, EveryTargetGivesTheReferenceBits) {
  for (DType dtype : kQuantizedDTypes) {
    const size_t block = dtype_block_elements(dtype);
    for (auto [n, inputs] : std::vector<std::pair<size_t, size_t>>{{1, 32}, {17, 64}, {50, 288}, {129, 544}}) {
      const size_t k = (inputs + block - 1) / block * block;
      const auto source = testing::random_quant_blocks(dtype, n * k, n * 31 + k, 1.0f);
      for (size_t rows : {1, 2, 3, 5, 8, 17}) expect_simd_matches_reference(dtype, source, n, k, awkward_rows(rows, k, rows), rows);
    }
  }
}

// ... with f16 factors of every finite magnitude (signed zeros, subnormals, up to 65504), and
// inputs of every rule (zeros, NaN, infinities, subnormals, ties, +-127 throughout).
TEST(Int8Matmul, EveryTargetGivesTheReferenceBitsWithExtremeScales) {
  for (DType dtype : kQuantizedDTypes) {
    const size_t n = 33, k = 3 * dtype_block_elements(dtype);
    const auto source = testing::random_quant_blocks(dtype, n * k, 5, 0.0f, true);
    for (size_t rows : {1, 4, 7}) expect_simd_matches_reference(dtype, source, n, k, awkward_rows(rows, k, 9 + rows), rows);
  }
}

// A NaN minimum (an f16 factor a file may hold, of either sign) gives the reference's NaN bits:
// negated where the type subtracts it, as the reference's fma(-minimum, s, acc). One such block
// per output, and finite inputs: two NaNs of other bits meeting in one fma give either, as the
// instruction form a compiler picks has it.
TEST(Int8Matmul, EveryTargetGivesTheReferenceBitsWithNaNMinimums) {
  for (DType dtype : kQuantizedDTypes) {
    const size_t n = 33, k = 3 * dtype_block_elements(dtype);
    auto source = testing::random_quant_blocks(dtype, n * k, 11, 1.0f);
    if (!testing::set_nan_minimums(dtype, source)) continue;
    for (size_t rows : {1, 4}) expect_simd_matches_reference(dtype, source, n, k, random_floats(rows * k, rows, 4.0f), rows);
  }
}

// A row with an infinity or NaN anywhere gives NaN outputs, the other rows their own values.
TEST(Int8Matmul, ANonFiniteInputMakesItsRowNaN) {
  const DType dtype = DType::Q4_1;
  const size_t n = 20, k = 64, rows = 3;
  const auto w = pack_int8(dtype, testing::random_quant_blocks(dtype, n * k, 1, 1.0f), n, k);
  auto x = random_floats(rows * k, 2, 1.0f);
  x[k + 40] = kInf;
  for_each_target([&] {
    std::vector<float> y(rows * n);
    kernels::matmul(x.data(), rows, w.view(), y.data(), 2);
    for (size_t o = 0; o < n; ++o) {
      EXPECT_FALSE(std::isnan(y[o]));
      EXPECT_TRUE(std::isnan(y[n + o]));
      EXPECT_FALSE(std::isnan(y[2 * n + o]));
    }
  });
}

}  // namespace
}  // namespace ditto
