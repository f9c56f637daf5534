// The invariance contract (DESIGN.md §1) on whole models: chunking, decode vs prefill,
// threads, and a golden hash that pins the bits across machines, compilers and commits.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "ditto/error.h"
#include "ditto/session.h"
#include "simd_targets.h"
#include "tensor/hash.h"
#include "test_checkpoint.h"

namespace ditto {
namespace {

using testing::TinyConfig;

std::vector<int32_t> prompt_of(size_t length, size_t vocab) {
  std::vector<int32_t> ids(length);
  testing::SplitMix64 rng(length);
  for (auto& id : ids) id = int32_t(rng.next() % vocab);
  return ids;
}

std::vector<float> prefill_in_chunks(std::shared_ptr<const Model> model, const std::vector<int32_t>& prompt,
                                     size_t chunk, SessionOptions options = {256, DType::F32, 1}) {
  Session session(model, options);
  std::vector<float> all;
  for (size_t at = 0; at < prompt.size(); at += chunk) {
    const size_t count = std::min(chunk, prompt.size() - at);
    const auto logits = session.prefill(std::span<const int32_t>(prompt).subspan(at, count), Logits::All);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct ModelCase {
  const char* name;
  TinyConfig config;
  DType cache;
};

class Invariance : public ::testing::TestWithParam<ModelCase> {};

TEST_P(Invariance, EveryChunkSizeGivesTheWholePromptBits) {
  const ModelCase& c = GetParam();
  const auto model = Model::load(testing::write_checkpoint(c.config, std::string("chunks-") + c.name));
  const auto prompt = prompt_of(100, c.config.vocab);
  const SessionOptions options{256, c.cache, 1};
  const auto whole = prefill_in_chunks(model, prompt, prompt.size(), options);
  for (size_t chunk : {1, 2, 3, 7, 16, 17, 31, 64})
    EXPECT_TRUE(bitwise_equal(prefill_in_chunks(model, prompt, chunk, options), whole)) << "chunk " << chunk;
}

TEST_P(Invariance, DecodeGivesThePrefillBits) {
  const ModelCase& c = GetParam();
  const auto model = Model::load(testing::write_checkpoint(c.config, std::string("decode-") + c.name));
  const auto prompt = prompt_of(40, c.config.vocab);
  const auto whole = prefill_in_chunks(model, prompt, prompt.size(), {256, c.cache, 1});
  Session session(model, {256, c.cache, 1});
  session.prefill(std::span<const int32_t>(prompt).first(5), Logits::None);
  for (size_t t = 5; t < prompt.size(); ++t) {
    const auto row = session.decode(prompt[t]);
    const std::vector<float> expected(whole.begin() + ptrdiff_t(t * c.config.vocab),
                                      whole.begin() + ptrdiff_t((t + 1) * c.config.vocab));
    ASSERT_TRUE(bitwise_equal(row, expected)) << "position " << t;
  }
}

TEST_P(Invariance, ThreadCountDoesNotChangeABit) {
  const ModelCase& c = GetParam();
  const auto model = Model::load(testing::write_checkpoint(c.config, std::string("threads-") + c.name));
  const auto prompt = prompt_of(50, c.config.vocab);
  const auto one = prefill_in_chunks(model, prompt, 13, {256, c.cache, 1});
  // Chunks of 13 rows do their work row by row on the calling thread; the whole prompt's 50 rows
  // split it over the threads.
  for (size_t chunk : {13, 50})
    for (int threads : {2, 3, 4})
      EXPECT_TRUE(bitwise_equal(prefill_in_chunks(model, prompt, chunk, {256, c.cache, threads}), one))
          << "chunk " << chunk << ", " << threads << " threads";
}

// Past what the attention kernel cuts work by (tiles of 64 row-heads, here 32 rows; blocks of 32
// and 64 keys; chunks of 256 keys when a pass has few tiles): every chunking, thread count and
// decode give the whole prompt's bits.
TEST_P(Invariance, LongPromptPastTilesAndKeyBlocks) {
  const ModelCase& c = GetParam();
  const auto model = Model::load(testing::write_checkpoint(c.config, std::string("long-") + c.name));
  const auto prompt = prompt_of(300, c.config.vocab);
  const auto whole = prefill_in_chunks(model, prompt, prompt.size(), {512, c.cache, 1});
  for (const auto& [chunk, threads] : {std::pair<size_t, int>{1, 2}, {33, 1}, {64, 3}, {300, 4}})
    EXPECT_TRUE(bitwise_equal(prefill_in_chunks(model, prompt, chunk, {512, c.cache, threads}), whole))
        << "chunk " << chunk << ", " << threads << " threads";
}

TinyConfig llama_tied_f32() {
  TinyConfig c;
  c.arch = "llama";
  c.tied = true;
  c.dtype = DType::F32;
  c.heads = 4;
  c.kv_heads = 1;
  return c;
}

TinyConfig qwen3_f16() {
  TinyConfig c;
  c.dtype = DType::F16;
  c.head_dim = 24;
  return c;
}

// Gemma's three layers, sliding window, global, sliding window (prompts of 40 to 100 run past
// the window), with one kv head, tied, in f32.
TinyConfig gemma3_mqa_tied_f32() {
  TinyConfig c = testing::tiny_family("gemma3_text");
  c.kv_heads = 1;
  c.tied = true;
  c.dtype = DType::F32;
  return c;
}

INSTANTIATE_TEST_SUITE_P(Models, Invariance,
                         ::testing::Values(ModelCase{"qwen3_bf16", TinyConfig{}, DType::F32},
                                           ModelCase{"qwen3_bf16_cache_bf16", TinyConfig{}, DType::BF16},
                                           ModelCase{"llama_tied_f32_cache_f16", llama_tied_f32(), DType::F16},
                                           ModelCase{"qwen3_f16", qwen3_f16(), DType::F32},
                                           ModelCase{"qwen2_window", testing::tiny_family("qwen2"), DType::F32},
                                           ModelCase{"mistral_window_cache_bf16", testing::tiny_family("mistral"), DType::BF16},
                                           ModelCase{"phi3", testing::tiny_family("phi3"), DType::F32},
                                           ModelCase{"llama3_rope", testing::tiny_family("llama"), DType::F32},
                                           ModelCase{"mixtral", testing::tiny_family("mixtral"), DType::F16},
                                           ModelCase{"qwen3_moe", testing::tiny_family("qwen3_moe"), DType::F32},
                                           ModelCase{"gemma3", testing::tiny_family("gemma3_text"), DType::F32},
                                           ModelCase{"gemma3_mqa_tied_f32_cache_bf16", gemma3_mqa_tied_f32(), DType::BF16}),
                         [](const auto& info) { return std::string(info.param.name); });

// The bits of the default tiny model, pinned: a change here means ditto computes a different
// function (or different rounding) than before — on purpose only, with docs/numerics.md. The
// same on every SIMD target, the scalar reference included.
TEST(GoldenHash, TinyQwen3LogitsArePinnedOnEveryTarget) {
  const auto model = Model::load(testing::write_checkpoint(TinyConfig{}, "golden"));
  testing::for_each_target([&] {
    Session session(model, {64, DType::F32, 2});
    const auto logits = session.prefill(prompt_of(33, TinyConfig{}.vocab), Logits::All);
    LogitsHash hash;
    hash.update(logits.data(), logits.size());
    EXPECT_EQ(hash.hex(), "0cefd75b70cdbd05");
  });
}

// The same for a model of each family (testing::tiny_family: llama with llama3 RoPE), so that
// what each computes beyond Qwen3 is pinned too.
struct GoldenCase {
  const char* arch;
  const char* hash;
};

class FamilyGoldenHash : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(FamilyGoldenHash, LogitsArePinnedOnEveryTarget) {
  const TinyConfig config = testing::tiny_family(GetParam().arch);
  const auto model = Model::load(testing::write_checkpoint(config, std::string("golden-") + GetParam().arch));
  testing::for_each_target([&] {
    Session session(model, {64, DType::F32, 2});
    const auto logits = session.prefill(prompt_of(33, config.vocab), Logits::All);
    LogitsHash hash;
    hash.update(logits.data(), logits.size());
    EXPECT_EQ(hash.hex(), GetParam().hash);
  });
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyGoldenHash,
                         ::testing::Values(GoldenCase{"qwen2", "5455a1ff710685ec"}, GoldenCase{"mistral", "6a728c8cd7e44a41"},
                                           GoldenCase{"phi3", "69fa3fe93074305c"}, GoldenCase{"llama", "3c0d8b29259d4465"},
                                           GoldenCase{"mixtral", "66b5796a984c7d81"},
                                           GoldenCase{"qwen3_moe", "ed64afb8271d9022"},
                                           GoldenCase{"gemma3_text", "f35b63c076d42408"}),
                         [](const auto& info) { return std::string(info.param.arch); });

TEST(SessionErrors, TooLongPromptIsRefusedAndTheSessionStaysUsable) {
  const auto model = Model::load(testing::write_checkpoint(TinyConfig{}, "too-long"));
  Session session(model, {8, DType::F32, 1});
  session.prefill(prompt_of(5, 96), Logits::None);
  try {
    session.prefill(prompt_of(4, 96), Logits::Last);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("do not fit"), std::string::npos) << e.what();
  }
  EXPECT_EQ(session.position(), 5u);
  EXPECT_EQ(session.prefill(prompt_of(3, 96), Logits::Last).size(), 96u);
  EXPECT_EQ(session.position(), 8u);
}

TEST(SessionErrors, TokenOutsideTheVocabularyIsRefused) {
  const auto model = Model::load(testing::write_checkpoint(TinyConfig{}, "bad-token"));
  Session session(model, {16, DType::F32, 1});
  const std::vector<int32_t> bad = {1, 2, 96};
  EXPECT_THROW(session.prefill(bad), Error);
  const std::vector<int32_t> negative = {-1};
  EXPECT_THROW(session.prefill(negative), Error);
  EXPECT_EQ(session.position(), 0u);
  EXPECT_THROW(session.prefill(std::vector<int32_t>{}), Error);
}

}  // namespace
}  // namespace ditto
