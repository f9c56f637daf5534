// GGUF files and quantised weights: block decoding, packing, a tiny quantised llama model that
// keeps the invariance contract, and bad files that get a clear ditto::Error, never a crash
// (this file also runs under ASan/UBSan).
#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <vector>

#include "ditto/error.h"
#include "ditto/session.h"
#include "kernels/kernels.h"
#include "model/gguf.h"
#include "simd_targets.h"
#include "tensor/matrix.h"
#include "tensor/quant.h"
#include "test_checkpoint.h"
#include "test_gguf.h"

namespace ditto {
namespace {

using testing::expect_error;
using testing::GgufWriter;
using testing::kF32;
using testing::kQ4_0;
using testing::kQ4_1;
using testing::kQ6_K;
using testing::kQ8_0;
using testing::random_blocks;
using testing::tiny_llama;

GgufFile parse(const std::vector<unsigned char>& bytes) {
  return parse_gguf(std::as_bytes(std::span(bytes)), "test.gguf");
}

TEST(Quant, BlocksDecodeAsGgmlStoresThem) {
  // Q4_1: d = 0.5, m = -1.25; byte 0 = 0x3a holds entry 0 (0xa = 10) and entry 16 (0x3).
  std::vector<unsigned char> q4_1(20, 0);
  const uint16_t d = f32_to_f16(0.5f), m = f32_to_f16(-1.25f);
  std::memcpy(&q4_1[0], &d, 2), std::memcpy(&q4_1[2], &m, 2);
  q4_1[4] = 0x3a;
  const QuantBlock b = read_block(DType::Q4_1, q4_1.data());
  EXPECT_EQ(b.q[0], 10);
  EXPECT_EQ(b.q[16], 3);
  EXPECT_EQ(dequantize(DType::Q4_1, b.d, b.m, b.q[0]), 3.75f);
  EXPECT_EQ(dequantize(DType::Q4_1, b.d, b.m, b.q[16]), 0.25f);
  EXPECT_EQ(dequantize(DType::Q4_0, 0.5f, 0.0f, 3), -2.5f);   // d * (q - 8)
  // Q8_0 entries are signed bytes.
  std::vector<unsigned char> q8(34, 0);
  std::memcpy(&q8[0], &d, 2);
  q8[2] = 0x80, q8[33] = 0x7f;
  const QuantBlock c = read_block(DType::Q8_0, q8.data());
  EXPECT_EQ(dequantize(DType::Q8_0, c.d, c.m, c.q[0]), -64.0f);
  EXPECT_EQ(dequantize(DType::Q8_0, c.d, c.m, c.q[31]), 63.5f);
}

TEST(Quant, PackedMatrixReadsEveryBlockValueInAnyRowOrder) {
  for (DType dtype : {DType::Q8_0, DType::Q4_0, DType::Q4_1}) {
    const size_t rows = 19, cols = 96;
    const auto source = random_blocks(dtype, rows * cols, 7);
    std::vector<size_t> order(rows);
    for (size_t r = 0; r < rows; ++r) order[r] = (r * 7) % rows;
    for (bool permuted : {false, true}) {
      const auto packed = PackedMatrix::pack(dtype, rows, cols, source.data(),
                                             permuted ? std::span<const size_t>(order) : std::span<const size_t>());
      for (size_t n = 0; n < rows; ++n) {
        const size_t from = permuted ? order[n] : n;
        for (size_t k = 0; k < cols; ++k) {
          const QuantBlock block =
              read_block(dtype, source.data() + dtype_bytes(dtype, from * cols + k / 32 * 32));
          ASSERT_EQ(packed.view().at(n, k), dequantize(dtype, block.d, block.m, block.q[k % 32]))
              << dtype_name(dtype) << " n " << n << " k " << k;
        }
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

// The quantised model keeps the contract: every chunking, thread count and decode give the
// bits of the whole-prompt run.
TEST(Gguf, QuantisedModelIsInvariantToChunksThreadsAndDecode) {
  for (DType dtype : {DType::Q4_1, DType::Q4_0, DType::Q8_0}) {
    const auto model = Model::load(testing::write_gguf("tiny-" + dtype_name(dtype), tiny_llama(dtype).bytes()));
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
            << dtype_name(dtype) << " chunk " << chunk << " threads " << threads;
      }
    }
  }
}

// ... and every SIMD target gives the bits of the scalar reference (the in-register and the
// blocked dequantisation both: 40 rows whole, then in chunks of 16).
TEST(Gguf, QuantisedModelGivesTheSameBitsOnEveryTarget) {
  for (DType dtype : {DType::Q4_1, DType::Q4_0, DType::Q8_0}) {
    const auto model = Model::load(testing::write_gguf("tiny-" + dtype_name(dtype), tiny_llama(dtype).bytes()));
    std::vector<int32_t> prompt;
    for (int i = 0; i < 40; ++i) prompt.push_back((i * 37 + 5) % 80);
    std::vector<std::pair<std::string, std::vector<float>>> runs;  // (target and chunk, logits)
    testing::for_each_target([&] {
      for (size_t chunk : {size_t(40), size_t(16)}) {
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
          << dtype_name(dtype) << ": " << name << " differs from " << runs.front().first;
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
  GgufWriter q6;
  q6.tensor("token_embd.weight", kQ6_K, {256, 2}, std::vector<unsigned char>(420, 0));
  expect_error([&] { parse(q6.bytes()); }, "has type Q6_K; ditto reads");
  GgufWriter unknown;
  unknown.tensor("t", 99, {32}, std::vector<unsigned char>(128, 0));
  expect_error([&] { parse(unknown.bytes()); }, "unknown type 99");
  GgufWriter partial;
  partial.tensor("t", kQ4_0, {48}, std::vector<unsigned char>(64, 0));
  expect_error([&] { parse(partial.bytes()); }, "not whole blocks of 32");
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
  expect_error([&] { Model::load(testing::write_gguf("bias", extra.bytes())); }, "'blk.0.attn_q.bias' is not part of a decoder");
  // GGUF metadata goes through config.json's checks (model/config.cpp), named as GGUF's.
  expect_error([&] { Model::load(testing::write_gguf("eps", tiny_llama(DType::Q4_1, -1e-5f).bytes())); },
               "GGUF: rms_norm_eps must be a finite number, not negative");
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
