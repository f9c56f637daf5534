// The deterministic math of the numerics contract: accurate, and exactly as specified.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ditto/dtype.h"
#include "kernels/ref/kernels.h"
#include "kernels/ref/math.h"

namespace ditto {
namespace {

int64_t ulp_distance(float a, float b) {
  const auto ordered = [](float x) {
    const int32_t bits = int32_t(f32_bits(x));
    return bits < 0 ? int64_t(INT32_MIN) - bits : int64_t(bits);
  };
  return std::llabs(ordered(a) - ordered(b));
}

TEST(ExpF32, WithinTwoUlpOfTheTrueValue) {
  int64_t worst = 0;
  for (float x = -87.0f; x < 88.7f; x += 0.0137f) {
    const float expected = float(std::exp(double(x)));
    worst = std::max(worst, ulp_distance(ref::exp_f32(x), expected));
  }
  EXPECT_LE(worst, 2);
}

TEST(ExpF32, EdgesAndSubnormals) {
  EXPECT_EQ(ref::exp_f32(0.0f), 1.0f);
  EXPECT_EQ(ref::exp_f32(-200.0f), 0.0f);
  EXPECT_TRUE(std::isinf(ref::exp_f32(89.0f)));
  EXPECT_TRUE(std::isnan(ref::exp_f32(NAN)));
  EXPECT_EQ(ref::exp_f32(-INFINITY), 0.0f);
  // exp(-100) is subnormal in f32: one rounding, close to the true value.
  EXPECT_LE(ulp_distance(ref::exp_f32(-100.0f), float(std::exp(-100.0))), 1);
}

TEST(TanhF32, WithinOneUlpOfTheTrueValue) {
  // Every 997th positive float and its negative: both branches, their meeting point at 0.625,
  // subnormals and the saturation to +-1.
  int64_t worst = 0;
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 997)
    for (const float x : {f32_from_bits(bits), -f32_from_bits(bits)})
      worst = std::max(worst, ulp_distance(ref::tanh_f32(x), float(std::tanh(double(x)))));
  EXPECT_LE(worst, 1);
}

TEST(TanhF32, Edges) {
  EXPECT_EQ(f32_bits(ref::tanh_f32(0.0f)), f32_bits(0.0f));
  EXPECT_EQ(f32_bits(ref::tanh_f32(-0.0f)), f32_bits(-0.0f));
  EXPECT_EQ(ref::tanh_f32(INFINITY), 1.0f);
  EXPECT_EQ(ref::tanh_f32(-INFINITY), -1.0f);
  EXPECT_EQ(ref::tanh_f32(1e30f), 1.0f);
  EXPECT_TRUE(std::isnan(ref::tanh_f32(NAN)));
}

TEST(GeluTanh, MatchesTorchsFormulaInDouble) {
  // torch's gelu(approximate="tanh"): 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
  for (float g = -12.0f; g < 12.0f; g += 0.00731f) {
    const double x = g;
    const double expected = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(ref::gelu_tanh(g), expected, 4e-7 * std::max(1.0, std::fabs(expected))) << g;
  }
  EXPECT_EQ(ref::gelu_tanh(-200.0f), -0.0f);
  EXPECT_EQ(ref::gelu_tanh(200.0f), 200.0f);
}

TEST(DoubleMath, ExpLogSinCosAreAccurate) {
  for (double x = -700.0; x < 700.0; x += 1.37)
    EXPECT_NEAR(ref::exp_f64(x) / std::exp(x), 1.0, 4e-16) << x;
  for (double x : {1e-300, 0.3, 1.0, 2.0, 10000.0, 1e6, 5e300})
    EXPECT_NEAR(ref::log_f64(x), std::log(x), 4e-16 * std::fabs(std::log(x)) + 1e-300) << x;
  for (double x = -1000.0; x < 40000.0; x += 0.731) {
    double s, c;
    ref::sincos_f64(x, &s, &c);
    EXPECT_NEAR(s, std::sin(x), 2e-14) << x;
    EXPECT_NEAR(c, std::cos(x), 2e-14) << x;
  }
}

TEST(FoldLanes, FixedTreeOrder) {
  // 1e8 + 1 - 1e8 depends on order: lanes 0 and 8 are added before lane 4 joins.
  float lanes[ref::kLanes] = {};
  lanes[0] = 1e8f;
  lanes[8] = -1e8f;
  lanes[4] = 1.0f;
  EXPECT_EQ(ref::fold_lanes(lanes), 1.0f);
  float other[ref::kLanes] = {};
  other[0] = 1e8f;
  other[4] = 1.0f;
  other[12] = -1e8f;  // lanes 4 and 12 fold first, and the 1 is lost in 1 - 1e8
  EXPECT_EQ(ref::fold_lanes(other), 0.0f);
}

TEST(RopeAngles, MatchTheDoubleFormula) {
  float inv_freq[64], cos[64], sin[64];
  ref::rope_inverse_frequencies(1000000.0, 128, inv_freq);
  ref::rope_angles(inv_freq, 64, 12345, cos, sin);
  for (int i = 0; i < 64; ++i) {
    const float inv_freq = 1.0f / float(std::pow(1000000.0, double(float(2 * i) / 128.0f)));
    const double angle = double(12345.0f * inv_freq);
    EXPECT_NEAR(cos[i], std::cos(angle), 1e-6) << i;
    EXPECT_NEAR(sin[i], std::sin(angle), 1e-6) << i;
  }
}

}  // namespace
}  // namespace ditto

namespace ditto {
namespace {

TEST(Llama3Rope, KeepsHighFrequenciesDividesLowOnesAndInterpolatesBetween) {
  // head_dim 64, theta 500000, original context 64: wavelengths 2π/f run from 6.3 to ~4e5.
  float inv_freq[32], scaled[32];
  ref::rope_inverse_frequencies(500000.0, 64, inv_freq);
  std::copy(inv_freq, inv_freq + 32, scaled);
  ref::llama3_scale_frequencies(scaled, 32, 8.0, 1.0, 4.0, 64.0);
  size_t kept = 0, divided = 0, between = 0;
  for (int i = 0; i < 32; ++i) {
    const float wavelength = (1.0f / inv_freq[i]) * float(2 * M_PI);
    if (wavelength < 16.0f) {  // below original / high_freq_factor
      EXPECT_EQ(scaled[i], inv_freq[i]) << i;
      ++kept;
    } else if (wavelength > 64.0f) {  // beyond original / low_freq_factor
      EXPECT_EQ(scaled[i], inv_freq[i] / 8.0f) << i;
      ++divided;
    } else {
      EXPECT_LT(scaled[i], inv_freq[i]) << i;
      EXPECT_GT(scaled[i], inv_freq[i] / 8.0f) << i;
      ++between;
    }
  }
  EXPECT_GT(kept, 0u);
  EXPECT_GT(divided, 0u);
  EXPECT_GT(between, 0u);
}

TEST(RouteTopK, SoftmaxTopKTiesToTheLowerIndexAndRenormalises) {
  const float logits[5] = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  uint32_t chosen[2];
  float weights[2];
  ref::route_top_k(logits, 5, 2, /*normalize=*/true, chosen, weights);
  EXPECT_EQ(chosen[0], 1u);
  EXPECT_EQ(chosen[1], 3u);
  EXPECT_EQ(weights[0], 0.5f);
  EXPECT_EQ(weights[1], 0.5f);

  // Unnormalised: the softmax itself, from exp_f32 and the 16-lane sum.
  ref::route_top_k(logits, 5, 2, /*normalize=*/false, chosen, weights);
  float e[5], lanes[ref::kLanes] = {};
  for (int i = 0; i < 5; ++i) lanes[i] = e[i] = ref::exp_f32(logits[i] - 3.0f);
  const float total = ref::fold_lanes(lanes);
  EXPECT_EQ(weights[0], e[1] / total);
  EXPECT_EQ(weights[1], e[3] / total);

  // Top-1 of a tie takes the lower index; the order of the result is by index, not by weight.
  ref::route_top_k(logits, 5, 1, true, chosen, weights);
  EXPECT_EQ(chosen[0], 1u);
  EXPECT_EQ(weights[0], 1.0f);
  uint32_t three[3];
  float three_weights[3];
  ref::route_top_k(logits, 5, 3, false, three, three_weights);
  EXPECT_EQ(std::vector<uint32_t>(three, three + 3), (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(three_weights[1], e[2] / total);
}

TEST(AddBias, AddsTheBiasToEveryRow) {
  float y[6] = {1, 2, 3, 4, 5, 6};
  const float bias[3] = {0.5f, -1.0f, 0.25f};
  ref::add_bias(y, 2, 3, bias);
  EXPECT_EQ(std::vector<float>(y, y + 6), (std::vector<float>{1.5f, 1.0f, 3.25f, 4.5f, 4.0f, 6.25f}));
}

}  // namespace
}  // namespace ditto
