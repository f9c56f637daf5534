// The sampler (docs/sampling.md): exact outcomes on hand-made logits, agreement with a plain
// full-sort implementation of the definition, reproducible draws, and clear errors.
#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "ditto/error.h"
#include "kernels/ref/kernels.h"
#include "kernels/ref/math.h"
#include "expect_error.h"
#include "test_checkpoint.h"

namespace ditto {
namespace {

SamplingParams greedy_params() {
  SamplingParams p;
  p.temperature = 0.0;
  return p;
}

SamplingParams seeded(uint64_t seed) {
  SamplingParams p;
  p.seed = seed;
  return p;
}

int32_t token(const std::vector<float>& logits, const SamplingParams& params, std::vector<int32_t> history = {},
              uint64_t position = 0) {
  return sample(logits, history, params, position).token;
}

// floor(bits * count / 2^64): which of `count` equally weighted candidates a draw picks.
size_t equal_share(uint64_t bits, uint64_t count) { return size_t(((unsigned __int128)bits * count) >> 64); }

// ---------------------------------------------------------------------------------------------
// The definition, written plainly: penalties with a std::map, a full stable sort, no fast path.

std::vector<float> reference_penalized(std::vector<float> z, const std::vector<int32_t>& history,
                                       const SamplingParams& p) {
  const size_t window = p.penalty_window == 0 ? history.size() : std::min(history.size(), size_t(p.penalty_window));
  std::map<int32_t, uint32_t> counts;
  for (size_t i = history.size() - window; i < history.size(); ++i) ++counts[history[i]];
  const bool penalize = p.repetition_penalty != 1.0 || p.presence_penalty != 0.0 || p.frequency_penalty != 0.0;
  if (penalize)
    for (const auto& [t, c] : counts) {
      const float r = float(p.repetition_penalty);
      z[t] = z[t] > 0.0f ? z[t] / r : z[t] * r;
      z[t] = z[t] - (float(c) * float(p.frequency_penalty) + float(p.presence_penalty));
    }
  for (const auto& [t, b] : p.logit_bias) z[t] = z[t] + float(b);
  return z;
}

// The order of step 6: z descending, ties by lower id.
std::vector<uint32_t> reference_order(const std::vector<float>& z) {
  std::vector<uint32_t> order(z.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return z[a] > z[b]; });
  return order;
}

// The tokens the draw chooses from, by id, with their weights (steps 4-9; not greedy), given
// the penalised logits z and their order.
std::vector<std::pair<uint32_t, uint64_t>> reference_candidates(const std::vector<float>& z,
                                                                std::vector<uint32_t> order,
                                                                const SamplingParams& p) {
  const size_t vocab = z.size();
  const float inverse_temperature = 1.0f / float(p.temperature), max = z[order[0]];
  order.resize(p.top_k == 0 ? vocab : std::min(vocab, size_t(p.top_k)));
  std::vector<float> x;
  std::vector<uint64_t> w;
  for (uint32_t id : order) {
    x.push_back((z[id] - max) * inverse_temperature);
    w.push_back(ref::weight_of(x.back()));
  }
  size_t kept = order.size();
  if (p.top_p < 1.0) {
    // The shortest head with mass >= top_p * total: mass * 2^s >= m * total, top_p = m / 2^s.
    int exponent;
    const uint64_t m = uint64_t(std::ldexp(std::frexp(p.top_p, &exponent), 53));
    const int s = 53 - exponent;
    unsigned __int128 total = 0, mass = 0;
    for (uint64_t v : w) total += v;
    for (kept = 0; (mass << s) < m * total; ++kept) mass += w[kept];
  }
  const float min_x = p.min_p == 0.0 ? -INFINITY : float(ref::log_f64(p.min_p));
  std::vector<std::pair<uint32_t, uint64_t>> candidates;
  for (size_t i = 0; i < kept; ++i)
    if (x[i] >= min_x) candidates.push_back({order[i], w[i]});
  std::sort(candidates.begin(), candidates.end());
  return candidates;
}

// Step 10: walk the candidates by id to floor(bits * total / 2^64).
int32_t reference_draw(const std::vector<std::pair<uint32_t, uint64_t>>& candidates, uint64_t seed,
                       uint64_t position) {
  uint64_t total = 0;
  for (const auto& c : candidates) total += c.second;
  const uint64_t target = uint64_t(((unsigned __int128)draw_bits(seed, position) * total) >> 64);
  uint64_t mass = 0;
  for (const auto& [id, w] : candidates)
    if ((mass += w) > target) return int32_t(id);
  ADD_FAILURE() << "the reference found no token";
  return -1;
}

// ---------------------------------------------------------------------------------------------

TEST(Sampler, PhiloxKnownAnswer) {
  // Random123's published known-answer vector for Philox4x32-10 at counter 0, key 0:
  // 6627e8d5 e169c58d bc57ac4c 9b00dbd8. draw_bits takes words 0 and 1.
  EXPECT_EQ(draw_bits(0, 0), 0x6627e8d5e169c58dull);
}

// The weight kernels skip every scaled logit below ref::kNoWeightBelow as weight 0: true of
// every float there.
TEST(Sampler, EveryScaledLogitBelowTheCutOffWeighsNothing) {
  for (float x = ref::kNoWeightBelow; x > -110.0f;) {
    x = std::nextafter(x, -INFINITY);
    ASSERT_EQ(ref::weight_of(x), 0u) << x;
  }
  EXPECT_EQ(ref::weight_of(-INFINITY), 0u);
  EXPECT_GT(ref::weight_of(-30.0f), 0u);  // e^-30 > 2^-44: the cut-off is not far above the last weight
  EXPECT_EQ(ref::weight_of(0.0f), uint64_t(1) << ref::kWeightBits);
}

TEST(Sampler, GreedyTakesTheLowestIdAmongTies) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 2.5f, 3.0f};
  EXPECT_EQ(token(logits, greedy_params()), 1);
  SamplingParams top1 = seeded(7);
  top1.top_k = 1;
  for (uint64_t position = 0; position < 50; ++position) EXPECT_EQ(token(logits, top1, {}, position), 1);
  // Negative zero equals positive zero: a tie, so the lower id.
  EXPECT_EQ(token({-1.0f, 0.0f, -0.0f}, greedy_params()), 1);
  EXPECT_EQ(token({-1.0f, -0.0f, 0.0f}, greedy_params()), 1);
  EXPECT_EQ(token({5.0f}, greedy_params()), 0);
}

// Each penalty on hand-made logits, made to tie exactly with another logit: the greedy choice
// shows whether the arithmetic gave exactly the value of docs/sampling.md.
TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p = greedy_params();
  p.repetition_penalty = 2.0;
  EXPECT_EQ(token({2.0f, 1.0f}, p, {0}), 0);      // 2 / 2 = 1: a tie
  EXPECT_EQ(token({-1.0f, -2.0f}, p, {0}), 0);    // -1 * 2 = -2: a tie
  EXPECT_EQ(token({0.0f, -0.0f}, p, {0}), 0);     // 0 stays 0
  p.repetition_penalty = 2.0000002;
  EXPECT_EQ(token({2.0f, 1.0f}, p, {0}), 1);
  EXPECT_EQ(token({-1.0f, -2.0f}, p, {0}), 1);
  p.repetition_penalty = 0.5;  // below 1 it favours repeated tokens
  EXPECT_EQ(token({1.0f, 2.0f}, p, {0}), 0);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesSubtract) {
  SamplingParams p = greedy_params();
  p.presence_penalty = 0.5;
  EXPECT_EQ(token({1.5f, 1.0f}, p, {0, 0, 0}), 0);  // 1.5 - 0.5, once however often it occurs
  EXPECT_EQ(token({1.5f, 1.0f}, p, {1, 0, 1}), 0);  // 1 - 0.5 = 0.5 < 1.0
  p.presence_penalty = 0.0;
  p.frequency_penalty = 0.25;
  EXPECT_EQ(token({2.0f, 1.0f}, p, {0, 1, 0, 0, 0}), 0);  // 2 - 4 * 0.25 = 1: a tie
  EXPECT_EQ(token({2.0f, 1.0f}, p, {0, 0, 0, 0, 0}), 1);  // 2 - 5 * 0.25 < 1
  p.presence_penalty = 0.5;
  p.frequency_penalty = 0.25;  // 3 - (2 * 0.25 + 0.5) = 2, a tie with token 1
  EXPECT_EQ(token({3.0f, 2.0f}, p, {0, 0}), 0);
  p.presence_penalty = -1.0;  // negative values favour repeated tokens
  p.frequency_penalty = 0.0;
  EXPECT_EQ(token({1.0f, 1.5f}, p, {0}), 0);
}

TEST(Sampler, PenaltiesSeeOnlyTheWindow) {
  SamplingParams p = greedy_params();
  p.frequency_penalty = 1.0;
  const std::vector<float> logits = {3.0f, 1.0f};
  const std::vector<int32_t> history = {0, 0, 0, 1, 0};  // 0 occurs 4 times, 1 once
  p.penalty_window = 1;
  EXPECT_EQ(token(logits, p, history), 0);  // 3 - 1 = 2 > 1
  p.penalty_window = 4;
  EXPECT_EQ(token(logits, p, history), 0);  // 3 - 3 = 0 = 1 - 1: a tie
  p.penalty_window = 5;
  EXPECT_EQ(token(logits, p, history), 1);  // 3 - 4 < 1 - 1
  p.penalty_window = 0;  // the whole history
  EXPECT_EQ(token(logits, p, history), 1);
  p.penalty_window = 100;  // longer than the history: all of it
  EXPECT_EQ(token(logits, p, history), 1);
}

TEST(Sampler, LogitBiasIsAddedAfterThePenalties) {
  SamplingParams p = greedy_params();
  p.logit_bias = {{0, 1.0}};
  EXPECT_EQ(token({1.0f, 2.0f}, p), 0);  // 1 + 1 = 2: a tie
  p.logit_bias = {{0, 0.9999}};
  EXPECT_EQ(token({1.0f, 2.0f}, p), 1);
  p.logit_bias = {{1, -100.0}};
  EXPECT_EQ(token({1.0f, 2.0f}, p), 0);
  // (4 / 2) + 1 = 3 ties with token 1; (4 + 1) / 2 would not.
  p.repetition_penalty = 2.0;
  p.logit_bias = {{0, 1.0}};
  EXPECT_EQ(token({4.0f, 3.0f}, p, {0}), 0);
  EXPECT_EQ(token({4.0f, 2.5f}, p, {0}), 0);
  EXPECT_EQ(token({4.0f, 3.0001f}, p, {0}), 1);
}

// Equally likely candidates (equal logits: each weighs 2^44), the rest at -1000 (weight 0):
// the draw picks candidate floor(bits * count / 2^64) in id order, so each filter's kept set
// gives an exact expected token for every seed.
constexpr float kOut = -1000.0f;

TEST(Sampler, TopKKeepsTheKLargestTiesByLowerId) {
  const std::vector<float> logits = {1.0f, 4.0f, 4.0f, 2.0f, 4.0f, 3.0f};
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SamplingParams p = seeded(seed);
    p.top_k = 2;  // ids 1 and 2; id 4 ties but has the higher id
    EXPECT_EQ(token(logits, p, {}, 5), std::vector<int32_t>({1, 2})[equal_share(draw_bits(seed, 5), 2)]);
  }
  // k larger than the vocabulary: everything.
  SamplingParams p = seeded(1);
  p.top_k = 100;
  EXPECT_EQ(token({kOut, 0.0f, kOut, 0.0f, 0.0f}, p), std::vector<int32_t>({1, 3, 4})[equal_share(draw_bits(1, 0), 3)]);
}

TEST(Sampler, TopPKeepsTheShortestHeadWithTheMass) {
  // Four equal candidates at ids 3, 5, 7, 9: mass 1/4 each.
  std::vector<float> logits(12, kOut);
  for (int id : {9, 5, 7, 3}) logits[id] = 0.5f;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const uint64_t bits = draw_bits(seed, 0);
    SamplingParams p = seeded(seed);
    p.top_p = 0.5;  // exactly two quarters
    EXPECT_EQ(token(logits, p), std::vector<int32_t>({3, 5})[equal_share(bits, 2)]);
    p.top_p = 0.5000001;  // a little more than two: three
    EXPECT_EQ(token(logits, p), std::vector<int32_t>({3, 5, 7})[equal_share(bits, 3)]);
    p.top_p = 1e-300;  // always the first
    EXPECT_EQ(token(logits, p), 3);
    p.top_p = 0.75;
    p.top_k = 2;  // top-p within the top-k: two of two is 1.0 >= 0.75
    EXPECT_EQ(token(logits, p), std::vector<int32_t>({3, 5})[equal_share(bits, 2)]);
  }
}

TEST(Sampler, MinPKeepsTokensWithEnoughProbabilityRelativeToTheBest) {
  // p / p_max = 1 for ids 0 and 2, exp(-0.5) = 0.61 for id 4, exp(-3) = 0.05 for id 1.
  const std::vector<float> logits = {1.0f, -2.0f, 1.0f, kOut, 0.5f};
  const uint64_t w_half = ref::weight_of(-0.5f);
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const uint64_t bits = draw_bits(seed, 0);
    SamplingParams p = seeded(seed);
    p.min_p = 0.1;  // ids 0, 2, 4 in id order: weights 2^44, 2^44, w_half
    const uint64_t one = uint64_t(1) << 44;
    const uint64_t target = uint64_t(((unsigned __int128)bits * (2 * one + w_half)) >> 64);
    EXPECT_EQ(token(logits, p), target < one ? 0 : target < 2 * one ? 2 : 4);
    p.min_p = 0.7;  // only the two best
    EXPECT_EQ(token(logits, p), std::vector<int32_t>({0, 2})[equal_share(bits, 2)]);
    p.min_p = 1.0;
    EXPECT_EQ(token(logits, p), std::vector<int32_t>({0, 2})[equal_share(bits, 2)]);
  }
}

TEST(Sampler, TemperatureDividesTheLogits) {
  // Logits 0 and -2 at temperature 2 weigh exactly as logits 0 and -1 at temperature 1.
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SamplingParams hot = seeded(seed), plain = seeded(seed);
    hot.temperature = 2.0;
    EXPECT_EQ(token({0.0f, -2.0f}, hot), token({0.0f, -1.0f}, plain));
    EXPECT_EQ(token({6.0f, 4.0f, 5.0f}, hot), token({3.0f, 2.0f, 2.5f}, plain));
  }
  SamplingParams tiny = seeded(1);
  tiny.temperature = 1e-40;  // positive, but the largest logit over it overflows
  EXPECT_THROW(token({1.0f, 2.0f}, tiny), Error);
}

TEST(Sampler, TheOrderOfTheChainIsPenaltiesBiasTemperatureTopKTopPMinP) {
  // Penalties and bias come before top-k: token 0 drops out of the top 2 after its penalty.
  const std::vector<float> logits = {5.0f, 4.0f, 4.0f, kOut};
  for (uint64_t seed = 0; seed < 100; ++seed) {
    SamplingParams p = seeded(seed);
    p.top_k = 2;
    p.repetition_penalty = 5.0;  // 5 -> 1
    p.logit_bias = {{3, 1004.0}};  // -1000 -> 4
    // Top 2 of {1, 4, 4, 4}: ids 1 and 2.
    EXPECT_EQ(token(logits, p, {0}), std::vector<int32_t>({1, 2})[equal_share(draw_bits(seed, 0), 2)]);
  }
}

TEST(Sampler, AgreesWithAPlainFullSortImplementation) {
  struct Case {
    const char* name;
    SamplingParams params;
  };
  const auto with = [](auto change) {
    SamplingParams p;
    p.seed = 0;
    change(p);
    return p;
  };
  const std::vector<Case> cases = {
      {"temperature 1", with([](SamplingParams&) {})},
      {"temperature 0.7", with([](SamplingParams& p) { p.temperature = 0.7; })},
      {"temperature 0.3", with([](SamplingParams& p) { p.temperature = 0.3; })},
      {"top-k 40", with([](SamplingParams& p) { p.top_k = 40; })},
      {"top-k 1000", with([](SamplingParams& p) { p.top_k = 1000; })},
      {"top-p 0.99 T 0.3", with([](SamplingParams& p) { p.top_p = 0.99; p.temperature = 0.3; })},
      {"top-p 0.95", with([](SamplingParams& p) { p.top_p = 0.95; })},
      {"top-p 0.3 T 0.5", with([](SamplingParams& p) { p.top_p = 0.3; p.temperature = 0.5; })},
      {"min-p 0.05", with([](SamplingParams& p) { p.min_p = 0.05; })},
      {"top-k 50 top-p 0.9 min-p 0.1 T 1.3", with([](SamplingParams& p) {
         p.top_k = 50; p.top_p = 0.9; p.min_p = 0.1; p.temperature = 1.3; })},
      {"top-p 0.8 min-p 0.2", with([](SamplingParams& p) { p.top_p = 0.8; p.min_p = 0.2; })},
      {"penalties and bias", with([](SamplingParams& p) {
         p.repetition_penalty = 1.3; p.presence_penalty = 0.4; p.frequency_penalty = 0.2;
         p.penalty_window = 0; p.logit_bias = {{3, 2.5}, {10, -1.0}}; p.top_k = 20; p.temperature = 0.8; })},
  };
  // Flat logits (every token matters) and peaked ones (a few dominate), small vocabularies
  // and Qwen's 151,936, ties included (values are multiples of 2^-12).
  for (const size_t vocab : {size_t(1), size_t(2), size_t(17), size_t(1000), size_t(151936)}) {
    for (const bool peaked : {false, true}) {
      testing::SplitMix64 rng(vocab * 2 + peaked);
      std::vector<float> logits(vocab);
      for (float& v : logits) v = std::round(rng.uniform(peaked ? 4.0f : 2.0f) * 4096.0f) / 4096.0f;
      if (peaked)
        for (size_t i = 0; i < std::min<size_t>(vocab, 8); ++i) logits[rng.next() % vocab] += 12.0f;
      std::vector<int32_t> history;
      for (int i = 0; i < 100; ++i) history.push_back(int32_t(rng.next() % vocab));
      Sampler sampler;
      std::vector<float> sorted_z;  // the cases share z unless they penalise: sort once per z
      std::vector<uint32_t> order;
      for (const Case& c : cases) {
        if (c.params.logit_bias.size() && vocab <= 10) continue;
        const std::vector<float> z = reference_penalized(logits, history, c.params);
        if (z != sorted_z) {
          sorted_z = z;
          order = reference_order(z);
        }
        const auto candidates = reference_candidates(z, order, c.params);
        for (int i = 0; i < (vocab > 100000 ? 3 : 20); ++i) {
          SamplingParams p = c.params;
          p.seed = rng.next();
          const uint64_t position = rng.next() % 5000;
          ASSERT_EQ(sampler.sample(logits, history, p, position).token, reference_draw(candidates, *p.seed, position))
              << c.name << ", vocab " << vocab << (peaked ? " peaked" : " flat") << ", draw " << i;
        }
      }
    }
  }
}

TEST(Sampler, SameSeedAndPositionGiveTheSameTokenOtherSeedsOthers) {
  const std::vector<float> logits(1000, 0.0f);  // uniform over 1000 tokens
  std::set<int32_t> seen, at_positions;
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    const int32_t first = token(logits, seeded(seed), {}, 17);
    EXPECT_EQ(token(logits, seeded(seed), {}, 17), first);
    seen.insert(first);
  }
  for (uint64_t position = 0; position < 1000; ++position) at_positions.insert(token(logits, seeded(42), {}, position));
  // 1000 draws from 1000 equally likely tokens hit about 632 distinct ones (1 - 1/e).
  EXPECT_GT(seen.size(), 550u);
  EXPECT_GT(at_positions.size(), 550u);
}

TEST(Sampler, TheDrawDoesNotDependOnEarlierCalls) {
  testing::SplitMix64 rng(5);
  std::vector<float> logits(5000), other(700);
  for (float& v : logits) v = rng.uniform(3.0f);
  for (float& v : other) v = rng.uniform(8.0f);
  SamplingParams p = seeded(99);
  p.top_p = 0.9;
  p.repetition_penalty = 1.2;
  const std::vector<int32_t> history = {1, 2, 3, 2};
  const SampledToken alone = sample(logits, history, p, 12);

  Sampler busy;
  SamplingParams q = seeded(3);
  q.min_p = 0.2;
  q.logprobs = true;
  q.top_logprobs = 5;
  q.frequency_penalty = 0.5;
  for (uint64_t position = 0; position < 50; ++position) {
    busy.sample(other, std::vector<int32_t>{4, 4, 5}, q, position);
    busy.sample(logits, history, p, position + 13);
  }
  EXPECT_EQ(busy.sample(logits, history, p, 12).token, alone.token);
}

TEST(Sampler, WithSeedKeepsAGivenSeedAndDrawsAMissingOne) {
  SamplingParams p;
  p.seed = 1234;
  EXPECT_EQ(*with_seed(p).seed, 1234u);
  p.seed.reset();
  const auto a = with_seed(p).seed, b = with_seed(p).seed;
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b);  // 64 bits from std::random_device: equal with probability 2^-64
}

TEST(Sampler, LogprobsAreTheRawLogSoftmaxWithTiesByLowerId) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 2.5f, 0.0f};
  double total = 0;
  for (float v : logits) total += std::exp(double(v) - 3.0);
  const auto expected = [&](int id) { return double(logits[id]) - 3.0 - std::log(total); };
  SamplingParams p = seeded(3);
  p.temperature = 0.5;  // neither temperature nor penalties nor bias change the logprobs
  p.repetition_penalty = 1.5;
  p.logit_bias = {{2, 10.0}};
  p.logprobs = true;
  p.top_logprobs = 4;
  const SampledToken got = sample(logits, std::vector<int32_t>{1, 4}, p, 0);
  EXPECT_NEAR(got.logprob, expected(got.token), 1e-6);
  ASSERT_EQ(got.top.size(), 4u);
  const int order[] = {1, 3, 4, 0};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got.top[i].token, order[i]);
    EXPECT_NEAR(got.top[i].logprob, expected(order[i]), 1e-6);
  }
  EXPECT_EQ(got.top[0].logprob, got.top[1].logprob);  // the same logit: the same bits
  p.top_logprobs = 20;  // more than the vocabulary: all of it
  EXPECT_EQ(sample(logits, {}, p, 0).top.size(), logits.size());
  p.logprobs = false;
  p.top_logprobs = 0;
  EXPECT_TRUE(std::isnan(sample(logits, {}, p, 0).logprob));
}

TEST(Sampler, BadInputIsAClearError) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  const auto expect_error = [&](const SamplingParams& p, const std::string& words,
                                std::vector<float> values = {0.0f, 1.0f, 2.0f}, std::vector<int32_t> history = {}) {
    try {
      sample(values, history, p, 0);
      ADD_FAILURE() << "no error for: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  SamplingParams p = seeded(1);
  p.temperature = -0.1;
  expect_error(p, "temperature");
  p.temperature = NAN;
  expect_error(p, "temperature");
  p = seeded(1);
  for (double top_p : {0.0, -0.5, 1.5, double(NAN)}) {
    p.top_p = top_p;
    expect_error(p, "top_p");
  }
  p = seeded(1);
  p.min_p = 1.5;
  expect_error(p, "min_p");
  p = seeded(1);
  p.top_k = -1;
  expect_error(p, "top_k");
  p = seeded(1);
  p.repetition_penalty = 0.0;
  expect_error(p, "repetition_penalty");
  p = seeded(1);
  p.presence_penalty = INFINITY;
  expect_error(p, "presence_penalty");
  p = seeded(1);
  p.penalty_window = -1;
  expect_error(p, "penalty_window");
  p = seeded(1);
  p.logprobs = true;
  p.top_logprobs = 21;
  expect_error(p, "top_logprobs");
  p.logprobs = false;
  p.top_logprobs = 3;
  expect_error(p, "top_logprobs needs logprobs");
  p = seeded(1);
  p.logit_bias = {{3, 1.0}};
  expect_error(p, "logit_bias token 3");
  p.logit_bias = {{1, NAN}};
  expect_error(p, "logit_bias of token 1");
  p = SamplingParams();
  expect_error(p, "seed");
  p = seeded(1);
  expect_error(p, "logit 1 is nan", {0.0f, NAN, 1.0f});
  expect_error(p, "logit 2 is inf", {0.0f, 1.0f, INFINITY});
  expect_error(greedy_params(), "logit 0 is -inf", {-INFINITY, 1.0f, 2.0f});
  expect_error(p, "entries", {});
  p.frequency_penalty = 1.0;
  expect_error(p, "history token 7", logits, {0, 7});
  p = greedy_params();
  p.logit_bias = {{0, 3e38}};
  expect_error(p, "infinite", {3e38f, 0.0f});
}

// The same draws on every machine, compiler and SIMD target: tokens recorded once from this
// implementation of docs/sampling.md. A change here changes what seeded requests answer.
TEST(Sampler, GoldenDraws) {
  testing::SplitMix64 rng(2024);
  std::vector<float> logits(151936);
  for (float& v : logits) v = rng.uniform(3.0f);
  for (int i = 0; i < 16; ++i) logits[rng.next() % logits.size()] += 9.0f;
  const std::vector<int32_t> history = {5, 17, 5, 151935, 99};
  std::vector<SamplingParams> params(5, seeded(0x5eed));
  params[1].top_k = 40;
  params[2].top_p = 0.95;
  params[3].min_p = 0.05;
  params[3].temperature = 0.8;
  params[4].top_k = 40;
  params[4].top_p = 0.9;
  params[4].min_p = 0.02;
  params[4].repetition_penalty = 1.1;
  params[4].frequency_penalty = 0.3;
  params[4].logit_bias = {{17, 3.0}};
  std::vector<int32_t> got;
  Sampler sampler;
  for (const auto& p : params)
    for (uint64_t position = 100; position < 104; ++position) got.push_back(sampler.sample(logits, history, p, position).token);
  const std::vector<int32_t> expected = {102962, 127343, 57760, 105043, 71238, 129436, 57760, 71238, 102358, 127510,
                                         57760,  104456, 57760, 76561,  57760, 57760,  71238, 141965, 57760,  71238};
  EXPECT_EQ(got, expected) << ::testing::PrintToString(got);
}

}  // namespace
}  // namespace ditto
