// GGUF files and quantised weights: block decoding, packing, a tiny quantised llama model that
// keeps the invariance contract, and bad files that get a clear ditto::Error, never a crash
// (this file also runs under ASan/UBSan).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <span>
#include <vector>

#include "ditto/error.h"
#include "ditto/session.h"
#include "kernels/kernels.h"
#include "tensor/hash.h"
#include "model/gguf.h"
#include "simd_targets.h"
#include "tensor/matrix.h"
#include "tensor/quant.h"
#include "expect_error.h"
#include "test_checkpoint.h"
#include "test_gguf.h"

namespace ditto {
namespace {

using testing::expect_error;
using testing::GgufWriter;
using testing::ggml_type;
using testing::kF32;
using testing::kQ4_0;
using testing::random_blocks;
using testing::tiny_llama;

constexpr uint32_t kQ8_K = 15;  // a ggml type ditto does not read

// The groups of the block of `dtype` that holds value `index` of a row.
std::vector<QuantGroup> block_groups(DType dtype, const unsigned char* row, size_t index) {
  std::vector<QuantGroup> groups(dtype_block_elements(dtype) / quant_group_size(dtype));
  const size_t block = index / dtype_block_elements(dtype) * dtype_block_elements(dtype);
  read_block(dtype, row + dtype_bytes(dtype, block), groups.data());
  return groups;
}

// Value `index` of a row of `dtype`, by the specification (read_block, dequantize).
float spec_value(DType dtype, const unsigned char* row, size_t index) {
  const auto groups = block_groups(dtype, row, index);
  const size_t in_block = index % dtype_block_elements(dtype), group = quant_group_size(dtype);
  const QuantGroup& g = groups[in_block / group];
  return dequantize(dtype, g.scale, g.minimum, g.entries[in_block % group]);
}


GgufFile parse(const std::vector<unsigned char>& bytes) {
  return parse_gguf(std::as_bytes(std::span(bytes)), "test.gguf");
}

TEST(Quant, BlocksDecodeAsGgmlStoresThem) {
  const uint16_t half = f32_to_f16(0.5f), quarter = f32_to_f16(0.25f), m = f32_to_f16(-1.25f);
  const auto value = [](DType dtype, const std::vector<unsigned char>& block, size_t index) {
    return spec_value(dtype, block.data(), index);
  };
  // Q4_1: d = 0.5, m = -1.25; byte 0 = 0x3a holds entry 0 (0xa = 10) and entry 16 (0x3).
  std::vector<unsigned char> q4_1(20, 0);
  std::memcpy(&q4_1[0], &half, 2), std::memcpy(&q4_1[2], &m, 2);
  q4_1[4] = 0x3a;
  EXPECT_EQ(value(DType::Q4_1, q4_1, 0), 3.75f);
  EXPECT_EQ(value(DType::Q4_1, q4_1, 16), 0.25f);
  // Q4_0: the same nibbles minus 8.
  std::vector<unsigned char> q4_0(18, 0);
  std::memcpy(&q4_0[0], &half, 2);
  q4_0[2] = 0x3a;
  EXPECT_EQ(value(DType::Q4_0, q4_0, 0), 1.0f);
  EXPECT_EQ(value(DType::Q4_0, q4_0, 16), -2.5f);
  // Q8_0 entries are signed bytes.
  std::vector<unsigned char> q8(34, 0);
  std::memcpy(&q8[0], &half, 2);
  q8[2] = 0x80, q8[33] = 0x7f;
  EXPECT_EQ(value(DType::Q8_0, q8, 0), -64.0f);
  EXPECT_EQ(value(DType::Q8_0, q8, 31), 63.5f);
  // Q5_0: the fifth bit of value j is bit j of the 4 bytes after d; values are q - 16.
  std::vector<unsigned char> q5_0(22, 0);
  std::memcpy(&q5_0[0], &half, 2);
  q5_0[2] = 0x01, q5_0[5] = 0x80;  // fifth bits of values 0 and 31
  q5_0[6] = 0x3a, q5_0[21] = 0xf0;
  EXPECT_EQ(value(DType::Q5_0, q5_0, 0), 5.0f);     // 0x1a - 16 = 10
  EXPECT_EQ(value(DType::Q5_0, q5_0, 16), -6.5f);   // 0x03 - 16
  EXPECT_EQ(value(DType::Q5_0, q5_0, 31), 7.5f);    // 0x1f - 16
  EXPECT_EQ(value(DType::Q5_0, q5_0, 15), -8.0f);   // 0x00 - 16
  // Q5_1: d * q + m with the fifth bit.
  std::vector<unsigned char> q5_1(24, 0);
  std::memcpy(&q5_1[0], &half, 2), std::memcpy(&q5_1[2], &m, 2);
  q5_1[4] = 0x01, q5_1[8] = 0x3a;
  EXPECT_EQ(value(DType::Q5_1, q5_1, 0), 11.75f);  // 0.5 * 26 - 1.25
  // Q4_K: d = 0.5, dmin = 0.25; sub-block 0 has scale 3 and minimum 2 (bytes 0 and 4), sub-block
  // 5 scale 0x21 (low nibble of byte 9, top bits of byte 1) and minimum 0x12 (high nibble of
  // byte 9, top bits of byte 5). Value 0 is the low nibble of byte 16; value 160 + 1 = 161
  // (sub-block 5 = chunk 2, high nibbles) the high nibble of byte 16 + 64 + 1.
  std::vector<unsigned char> q4_k(144, 0);
  std::memcpy(&q4_k[0], &half, 2), std::memcpy(&q4_k[2], &quarter, 2);
  q4_k[4] = 3, q4_k[8] = 2;
  q4_k[4 + 9] = 0x21, q4_k[4 + 1] = 0x80, q4_k[4 + 5] = 0x40;
  q4_k[16] = 0x07, q4_k[16 + 65] = 0xb0;
  EXPECT_EQ(value(DType::Q4_K, q4_k, 0), 1.5f * 7 - 0.5f);
  EXPECT_EQ(value(DType::Q4_K, q4_k, 161), (0.5f * 0x21) * 11 - 0.25f * 0x12);
  // Q5_K: the fifth bit of value v is bit v / 32 of byte 16 + v % 32.
  std::vector<unsigned char> q5_k(176, 0);
  std::memcpy(q5_k.data(), q4_k.data(), 16);
  q5_k[16 + 1] = 0x20;
  q5_k[48 + 65] = 0xb0;
  EXPECT_EQ(value(DType::Q5_K, q5_k, 161), (0.5f * 0x21) * (11 + 16) - 0.25f * 0x12);
  // Q6_K: d = 0.5; value 200 = 128 + 64 + 8: high nibble of low byte 64 + 8, bits 4-5 (value
  // 200 = 128 + 2 * 32 + 8) of high byte 128 + 32 + 8; scale of sub-block 12 = int8 at 192 + 12.
  std::vector<unsigned char> q6_k(210, 0);
  std::memcpy(&q6_k[208], &half, 2);
  q6_k[64 + 8] = 0x50, q6_k[128 + 32 + 8] = 0x20, q6_k[192 + 12] = 0xfd;  // scale -3
  EXPECT_EQ(value(DType::Q6_K, q6_k, 200), -1.5f * float((5 | 2 << 4) - 32));
  // Q2_K: value 37 = 32 + 5: bits 2-3 of byte 16 + 5; sub-block 2's byte (minimum 4, scale 9).
  std::vector<unsigned char> q2_k(84, 0);
  std::memcpy(&q2_k[80], &half, 2), std::memcpy(&q2_k[82], &quarter, 2);
  q2_k[2] = 0x49, q2_k[16 + 5] = 0x0c;
  EXPECT_EQ(value(DType::Q2_K, q2_k, 37), 4.5f * 3 - 1.0f);
  // Q3_K: value 37: 2 bits as in Q2_K, high bit 1 of byte 5 (set: no -4); sub-block 2's scale:
  // low nibble of byte 96 + 2, top bits 0-1 of byte 96 + 10, minus 32.
  std::vector<unsigned char> q3_k(110, 0);
  std::memcpy(&q3_k[108], &half, 2);
  q3_k[5] = 0x02, q3_k[32 + 5] = 0x0c, q3_k[96 + 2] = 0x07, q3_k[96 + 10] = 0x03;
  EXPECT_EQ(value(DType::Q3_K, q3_k, 37), (0.5f * float(0x37 - 32)) * 3);
  EXPECT_EQ(value(DType::Q3_K, q3_k, 38), (0.5f * float(0x37 - 32)) * -4);
}

TEST(Quant, PackedMatrixReadsEveryBlockValueInAnyRowOrder) {
  for (DType dtype : kQuantizedDTypes) {
    const size_t rows = 19, cols = 3 * dtype_block_elements(dtype);
    const auto source = random_blocks(dtype, rows * cols, 7);
    std::vector<size_t> order(rows);
    for (size_t r = 0; r < rows; ++r) order[r] = (r * 7) % rows;
    for (bool permuted : {false, true}) {
      const auto packed = PackedMatrix::pack(dtype, rows, cols, source.data(),
                                             permuted ? std::span<const size_t>(order) : std::span<const size_t>());
      for (size_t n = 0; n < rows; ++n) {
        const unsigned char* row = source.data() + dtype_bytes(dtype, (permuted ? order[n] : n) * cols);
        for (size_t k = 0; k < cols; ++k)
          ASSERT_EQ(f32_bits(packed.view().at(n, k)), f32_bits(spec_value(dtype, row, k)))
              << dtype_name(dtype) << " n " << n << " k " << k;
      }
    }
  }
}

TEST(Gguf, ReadsMetadataAndTensors) {
  const GgufFile g = parse(tiny_llama(DType::Q4_1).bytes());
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_uint("llama.block_count"), 2u);
  EXPECT_EQ(g.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  ASSERT_EQ(g.tensors.size(), 21u);
  EXPECT_EQ(g.tensors[0].name, "token_embd.weight");
  EXPECT_EQ(g.tensors[0].dtype, DType::Q8_0);
  EXPECT_EQ(g.tensors[0].shape, (std::vector<size_t>{80, 64}));
  const ModelConfig c = gguf_model_config(g);
  EXPECT_EQ(c.architecture_name, "llama");
  EXPECT_EQ(c.vocab_size, 80u);
  EXPECT_EQ(c.head_dim, 16u);
  EXPECT_EQ(c.kv_heads, 2u);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.eos_token_id, 2);
}

constexpr Numerics kBothNumerics[] = {Numerics::Exact, Numerics::Int8};

std::shared_ptr<const Model> tiny_model(DType dtype, Numerics numerics) {
  const auto model = Model::load(testing::write_gguf("tiny-" + dtype_name(dtype), tiny_llama(dtype).bytes()), numerics);
  EXPECT_EQ(model->numerics(), numerics);
  return model;
}

// The model-level tests of quantised files, one test per type and numerics: apart, so that a
// failure names its case and ctest -j runs them side by side.
class QuantisedModel : public ::testing::TestWithParam<std::tuple<Numerics, DType>> {};

INSTANTIATE_TEST_SUITE_P(Gguf, QuantisedModel,
                         ::testing::Combine(::testing::ValuesIn(kBothNumerics), ::testing::ValuesIn(kQuantizedDTypes)),
                         [](const auto& info) {
                           return numerics_name(std::get<0>(info.param)) + "_" + dtype_name(std::get<1>(info.param));
                         });

// The quantised model keeps the contract, in both numerics: every chunking, thread count and
// decode give the bits of the whole-prompt run.
TEST_P(QuantisedModel, IsInvariantToChunksThreadsAndDecode) {
  const auto [numerics, dtype] = GetParam();
  const auto model = tiny_model(dtype, numerics);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 37 + 5) % 80);
  Session whole(model, {64, DType::F32, 1});
  const auto expected = whole.prefill(prompt, Logits::All);
  for (size_t chunk : {1, 2, 3, 7, 16, 17, 31}) {
    for (int threads : {1, 2, 3}) {
      Session session(model, {64, DType::F32, threads});
      std::vector<float> logits;
      for (size_t at = 0; at < prompt.size(); at += chunk) {
        const size_t count = std::min(chunk, prompt.size() - at);
        const auto part = chunk == 1 ? session.decode(prompt[at])
                                     : session.prefill(std::span(prompt).subspan(at, count), Logits::All);
        logits.insert(logits.end(), part.begin(), part.end());
      }
      ASSERT_EQ(std::memcmp(logits.data(), expected.data(), expected.size() * 4), 0)
          << numerics_name(numerics) << " " << dtype_name(dtype) << " chunk " << chunk << " threads " << threads;
    }
  }
}

// ... and every SIMD target gives the bits of the scalar reference (the in-register and the
// blocked dequantisation both: 40 rows whole, then in chunks of 5).
TEST_P(QuantisedModel, GivesTheSameBitsOnEveryTarget) {
  const auto [numerics, dtype] = GetParam();
  const auto model = tiny_model(dtype, numerics);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 37 + 5) % 80);
  std::vector<std::pair<std::string, std::vector<float>>> runs;  // (target and chunk, logits)
  testing::for_each_target([&] {
    for (size_t chunk : {size_t(40), size_t(5)}) {
      Session session(model, {64, DType::F32, 2});
      std::vector<float> logits;
      for (size_t at = 0; at < prompt.size(); at += chunk) {
        const auto part = session.prefill(std::span(prompt).subspan(at, std::min(chunk, prompt.size() - at)),
                                          Logits::All);
        logits.insert(logits.end(), part.begin(), part.end());
      }
      runs.emplace_back(kernels::target_name() + " chunk " + std::to_string(chunk), std::move(logits));
    }
  });
  ASSERT_GE(runs.size(), 2u);
  for (const auto& [name, logits] : runs)
    ASSERT_EQ(std::memcmp(logits.data(), runs.front().second.data(), logits.size() * 4), 0)
        << numerics_name(numerics) << " " << dtype_name(dtype) << ": " << name << " differs from "
        << runs.front().first;
}

// The bits of the int8 numerics on the tiny model of each type, pinned like the exact ones in
// session_test.cpp: a change here changes the function (docs/numerics-quant.md), on purpose
// only. The same on every SIMD target, the scalar reference included.
TEST(GoldenHash, Int8NumericsArePinnedOnEveryTarget) {
  const std::map<DType, std::string> expected = {
      {DType::Q8_0, "cb3dcbe4fee535d1"}, {DType::Q4_0, "33d9fe844faec28f"}, {DType::Q4_1, "e091661724459cb7"},
      {DType::Q5_0, "109ce8a8fd68d773"}, {DType::Q5_1, "77057f4ac8e0136c"}, {DType::Q2_K, "02da8e7e78d7cec4"},
      {DType::Q3_K, "c21cb6146841c206"}, {DType::Q4_K, "1706c34869e2ea04"}, {DType::Q5_K, "2221731f07146fbf"},
      {DType::Q6_K, "db416805f88ed5b5"}};
  for (DType dtype : kQuantizedDTypes) {
    const auto model = tiny_model(dtype, Numerics::Int8);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 33; ++i) prompt.push_back((i * 29 + 3) % 80);
    testing::for_each_target([&] {
      Session session(model, {64, DType::F32, 2});
      const auto logits = session.prefill(prompt, Logits::All);
      LogitsHash hash;
      hash.update(logits.data(), logits.size());
      EXPECT_EQ(hash.hex(), expected.at(dtype)) << dtype_name(dtype);
    });
  }
}

TEST(GgufErrors, WrongMagicVersionOrTruncation) {
  auto bytes = tiny_llama(DType::Q4_1).bytes();
  auto bad = bytes;
  bad[0] = 'X';
  expect_error([&] { parse(bad); }, "does not start with the magic 'GGUF'");
  bad = bytes;
  bad[4] = 1;
  expect_error([&] { parse(bad); }, "GGUF version 1 is not supported");
  for (size_t size : {size_t(3), size_t(10), size_t(30), size_t(500), bytes.size() / 2, bytes.size() - 1})
    EXPECT_THROW(parse(std::vector<unsigned char>(bytes.begin(), bytes.begin() + ptrdiff_t(size))), Error) << size;
  expect_error([&] { Model::load(testing::write_gguf("truncated", std::vector<unsigned char>(bytes.begin(), bytes.end() - 40))); },
               "runs past the end of the file");
}

TEST(GgufErrors, AbsurdCountsAndLengths) {
  const auto bytes = tiny_llama(DType::Q4_1).bytes();
  auto bad = bytes;
  const uint64_t huge = uint64_t(1) << 60;
  std::memcpy(&bad[8], &huge, 8);  // tensor count
  expect_error([&] { parse(bad); }, "tensor count");
  bad = bytes;
  std::memcpy(&bad[16], &huge, 8);  // metadata count
  expect_error([&] { parse(bad); }, "metadata count");
  bad = bytes;
  std::memcpy(&bad[24], &huge, 8);  // length of the first key
  expect_error([&] { parse(bad); }, "a metadata key claims");
  GgufWriter g;
  g.strings("tokenizer.ggml.tokens", {"a", "b"});
  auto list = g.bytes();
  // Element count of the array: after header (24), key (8 + 21), type (4), element type (4).
  std::memcpy(&list[24 + 8 + 21 + 8], &huge, 8);
  expect_error([&] { parse(list); }, "metadata array length");
}

TEST(GgufErrors, UnknownTypesAndBadTensors) {
  GgufWriter q8_k;
  q8_k.tensor("token_embd.weight", kQ8_K, {256, 2}, std::vector<unsigned char>(584, 0));
  expect_error([&] { parse(q8_k.bytes()); }, "has type Q8_K; ditto reads");
  GgufWriter unknown;
  unknown.tensor("t", 99, {32}, std::vector<unsigned char>(128, 0));
  expect_error([&] { parse(unknown.bytes()); }, "unknown type 99");
  GgufWriter partial;
  partial.tensor("t", kQ4_0, {48}, std::vector<unsigned char>(64, 0));
  expect_error([&] { parse(partial.bytes()); }, "not whole blocks of 32");
  GgufWriter partial_k;
  partial_k.tensor("t", ggml_type(DType::Q4_K), {288, 2}, std::vector<unsigned char>(2 * 144 * 2, 0));
  expect_error([&] { parse(partial_k.bytes()); }, "its rows of 288 values are not whole blocks of 256");
  GgufWriter dims;
  dims.tensor("t", kF32, {1, 1, 1, 1, 1}, std::vector<unsigned char>(4, 0));
  expect_error([&] { parse(dims.bytes()); }, "has 5 dimensions");
  GgufWriter twice;
  twice.tensor("t", kF32, {8}, std::vector<unsigned char>(32, 0));
  twice.tensor("t", kF32, {8}, std::vector<unsigned char>(32, 0));
  expect_error([&] { parse(twice.bytes()); }, "appears twice");
  auto value_type = tiny_llama(DType::Q4_1).bytes();
  value_type[24 + 8 + 20] = 77;  // the type of "general.architecture"
  expect_error([&] { parse(value_type); }, "unknown value type 77");
}

TEST(GgufErrors, ModelsDittoDoesNotRun) {
  GgufWriter other = tiny_llama(DType::Q4_1);
  other.str("general.architecture", "gpt2");  // a second key of the same name
  expect_error([&] { parse(other.bytes()); }, "appears twice");
  GgufWriter scaling = tiny_llama(DType::Q4_1);
  scaling.str("llama.rope.scaling.type", "yarn");
  expect_error([&] { Model::load(testing::write_gguf("yarn", scaling.bytes())); }, "rope scaling of type 'yarn'");
  GgufWriter extra = tiny_llama(DType::Q4_1);
  extra.tensor("blk.0.attn_q.bias", kF32, {64}, std::vector<unsigned char>(256, 0));
  expect_error([&] { Model::load(testing::write_gguf("bias", extra.bytes())); }, "'blk.0.attn_q.bias' is not part of a llama decoder");
  // GGUF metadata goes through config.json's checks (model/config.cpp), named as GGUF's.
  expect_error([&] { Model::load(testing::write_gguf("eps", tiny_llama(DType::Q4_1, -1e-5f).bytes())); },
               "GGUF: rms_norm_eps (llama.attention.layer_norm_rms_epsilon) is -1e-05, outside the accepted range 0..1");
  GgufWriter family;
  family.str("general.architecture", "mamba");
  expect_error([&] { Model::load(testing::write_gguf("mamba", family.bytes())); },
               "GGUF architecture 'mamba' is not supported; ditto runs qwen3, llama");
  GgufWriter missing;
  missing.str("general.architecture", "llama");
  expect_error([&] { Model::load(testing::write_gguf("missing", missing.bytes())); }, "no metadata 'llama.block_count'");
}

}  // namespace
}  // namespace ditto
