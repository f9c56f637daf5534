// Hostile inputs (issue 17): files, configs, tokenizers and numbers made to break ditto must be
// refused with a ditto::Error that names the field, the value and the accepted range, never crash,
// wrap or be silently accepted. One test per class of input; the hostile-input suite that
// scripts/test.sh also runs under ASan and UBSan, with GCC and with clang.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ditto/batch.h"
#include "ditto/error.h"
#include "ditto/load.h"
#include "ditto/session.h"
#include "ditto/tokenizer.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/describe.h"
#include "model/gguf.h"
#include "model/tensor_store.h"
#include "runtime/kv_pool.h"
#include "runtime/scheduler.h"
#include "runtime/token_ids.h"
#include "tensor/checked.h"
#include "tensor/limits.h"
#include "tensor/matrix.h"
#include "expect_error.h"
#include "test_checkpoint.h"
#include "test_gguf.h"

namespace ditto {
namespace {

using nlohmann::json;
using testing::expect_error;
using testing::GgufWriter;
using testing::TinyConfig;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr size_t kSizeMax = std::numeric_limits<size_t>::max();

// --- Sizes: one checked helper, never a wrapped size ---------------------------------------

TEST(HostileSizes, CheckedArithmeticRefusesToWrap) {
  EXPECT_EQ(checked_add(1, 2, "x"), 3u);
  EXPECT_EQ(checked_mul(size_t(1) << 31, size_t(1) << 32, "x"), size_t(1) << 63);
  EXPECT_EQ(checked_product("x", 2, 3, 5, 7), 210u);
  EXPECT_EQ(checked_round_up(17, 16, "x"), 32u);
  expect_error([] { checked_add(kSizeMax, 1, "the sum"); }, "the sum overflows: 18446744073709551615 + 1");
  expect_error([] { checked_mul(size_t(1) << 32, size_t(1) << 32, "the table"); }, "the table overflows");
  expect_error([] { checked_product("the pool", 2, size_t(1) << 40, size_t(1) << 30); }, "the pool overflows");
  expect_error([] { checked_round_up(kSizeMax - 3, 16, "the blocks"); }, "the blocks overflows");
  expect_error([] { require_memory(kSizeMax, "a table of everything"); },
               "a table of everything needs 17179869184.00 GiB, more than this machine's memory");
  require_memory(1 << 20, "a megabyte");  // what the machine has is fine
}

TEST(HostileSizes, KvPoolSizesAreCheckedBeforeAnythingIsAllocated) {
  ModelConfig c;
  c.layers = 1 << 16, c.kv_heads = 1 << 16, c.head_dim = 1 << 16, c.max_positions = 64;
  // 2 * 2^16 * 2^16 * 2^16 * 16 positions * 4 bytes = 2^55: one block fits in 64 bits; many do not.
  EXPECT_EQ(KVPool::block_bytes(c, DType::F32, 16), size_t(1) << 55);
  expect_error([&] { KVPool::block_bytes(c, DType::F32, 1 << 14); }, "a KV block's size overflows");
  expect_error([&] { KVPool pool(c, DType::F32, 16, 1 << 10); }, "a KV pool of 1024 blocks of 16 positions overflows");
  c.layers = 1, c.kv_heads = 1, c.head_dim = 2;
  expect_error([&] { KVPool pool(c, DType::F32, 16, size_t(1) << 40); },
               "a KV pool of 1099511627776 blocks of 16 positions needs 262144.00 GiB, more than this machine's memory");
  // Sequences x positions that would wrap: an error, not a tiny pool.
  expect_error([] { kv_blocks_for_sequences(2, kSizeMax, 16); }, "a count of KV blocks overflows");
  expect_error([] { kv_blocks_for_sequences(kSizeMax / 2, 1 << 20, 1); }, "the KV blocks of 9223372036854775807 sequences");
  expect_error([] { kv_blocks_for_sequences(1, kSizeMax, 1); }, "overflows");
  EXPECT_EQ(kv_blocks_for_sequences(3, 33, 16), 3u * 4u);
  // A budget larger than the machine is refused as such, before the pool is sized from it.
  expect_error([&] { kv_blocks_for_budget(c, DType::F32, 16, kSizeMax); }, "a KV budget of 18446744073709551615 bytes needs");
}

TEST(HostileSizes, SessionsAndRequestsCannotAskPastTheContext) {
  const auto model = Model::load(testing::write_checkpoint(TinyConfig{}, "hostile-session"));
  const size_t context = model->config().max_positions;
  for (const size_t capacity : {context + 1, kSizeMax})
    expect_error([&] { Session session(model, {capacity}); },
                 "positions is past the model's context of " + std::to_string(context) + " positions");
  // max_tokens of any size: the request is sized by its context, never by prompt + max_tokens.
  BatchOptions options;
  options.kv_blocks = kv_blocks_for_sequences(1, 40, options.block_size);
  BatchEngine engine(model, options);
  Generation result;
  Scheduler scheduler(engine, {1, 0, 0}, [](size_t, const SampledToken&) { return true; },
                      [&](size_t, Generation g) { result = std::move(g); });
  GenerationRequest request;
  request.prompt = {1, 2, 3};
  request.max_tokens = kSizeMax;
  request.max_length = 40;
  scheduler.submit(request);
  scheduler.run();
  EXPECT_EQ(result.ids.size(), 40u - 3u + 1u);  // one per position after the prompt, one from the last
  EXPECT_EQ(result.stop, StopReason::ContextFull);
}

TEST(HostileSizes, PackedMatricesAndPassesSayWhatTheyWouldTake) {
  expect_error([] { PackedMatrix::packed_bytes(DType::F32, 16, kSizeMax / 8); }, "a packed 16 x 2305843009213693951 matrix overflows");
  expect_error([] { PackedMatrix::packed_bytes(DType::Q8_0, kSizeMax / 4, 1 << 20); }, "overflows");
  EXPECT_EQ(PackedMatrix::packed_bytes(DType::F32, 17, 3), 2 * 3 * 16 * 4u);
  ModelConfig c;
  c.hidden_size = 1 << 20, c.intermediate_size = 1 << 20, c.heads = 1 << 16, c.kv_heads = 1 << 16, c.head_dim = 1 << 16;
  expect_error([&] { decoder_scratch_bytes(c, size_t(1) << 30); }, "the scratch of a forward pass of 1073741824 rows overflows");
}

// --- config.json: every number in its range, named with its value ------------------------

json tiny_config() { return json::parse(testing::config_json(TinyConfig{})); }

void expect_config_error(const std::string& key, const json& value, const std::string& fragment) {
  json config = tiny_config();
  config[key] = value;
  SCOPED_TRACE(key + " = " + value.dump());
  expect_error([&] { parse_hf_config(config.dump()); }, fragment);
}

TEST(HostileConfig, EveryNumberIsCheckedAgainstItsRange) {
  expect_config_error("hidden_size", uint64_t(1) << 40,
                      "config.json: hidden_size is 1099511627776, outside the accepted range 1..1048576");
  expect_config_error("vocab_size", kU64Max, "config.json: vocab_size is 18446744073709551615, outside the accepted range 1..16777216");
  expect_config_error("vocab_size", 0, "vocab_size is 0, outside the accepted range 1..16777216");
  expect_config_error("max_position_embeddings", int64_t(1000000000000),
                      "max_position_embeddings is 1000000000000, outside the accepted range 1..268435456");
  expect_config_error("num_hidden_layers", -1, "num_hidden_layers is -1, outside the accepted range 1..65536");
  expect_config_error("num_attention_heads", int64_t(1) << 17, "num_attention_heads is 131072, outside the accepted range 1..65536");
  expect_config_error("num_key_value_heads", 0, "num_key_value_heads is 0");
  expect_config_error("intermediate_size", 40.0, "intermediate_size is 40.0, not a whole number in 1..1048576");
  expect_config_error("hidden_size", "forty", "hidden_size is \"forty\", not a whole number in 1..1048576");
  expect_config_error("head_dim", 7, "the head size must be even");
  // Floats are checked as doubles before they narrow: 1e300 would be undefined as a float.
  expect_config_error("rms_norm_eps", -1e-6, "config.json: rms_norm_eps is -1e-06, outside the accepted range 0..1");
  expect_config_error("rms_norm_eps", 1e300, "rms_norm_eps is 1e+300, outside the accepted range 0..1");
  expect_config_error("rms_norm_eps", "tiny", "rms_norm_eps is \"tiny\", not a number");
  // A rope_theta of 1e-300 made RoPE's angles larger than any integer, which the float-to-integer
  // step of their reduction does not survive (float-cast-overflow); from 1 up, no angle exceeds
  // its position.
  json config = tiny_config();
  for (const double theta : {-10000.0, 0.0, 1e-300, 0.5, 1e39}) {
    config["rope_parameters"]["rope_theta"] = theta;
    char text[32];
    std::snprintf(text, sizeof text, "%g", theta);
    expect_error([&] { parse_hf_config(config.dump()); },
                 std::string("config.json: rope_theta is ") + text + ", outside the accepted range 1..3.40282e+38");
  }
  config["rope_parameters"]["rope_theta"] = 1.0;
  EXPECT_EQ(parse_hf_config(config.dump()).rope_theta, 1.0);
  // The extremes accepted give finite angles at the last position (under the sanitizers: no
  // conversion out of range on the way).
  std::vector<float> inv_freq(limits::kHeadDim.max / 2), cos(inv_freq.size()), sin(inv_freq.size());
  for (const double theta : {limits::kMinRopeTheta, limits::kMaxRopeTheta}) {
    kernels::rope_inverse_frequencies(theta, size_t(limits::kHeadDim.max), inv_freq.data());
    kernels::rope_angles(inv_freq.data(), inv_freq.size(), size_t(limits::kPositions.max - 1), cos.data(), sin.data());
    for (size_t i = 0; i < cos.size(); ++i) ASSERT_TRUE(std::isfinite(cos[i]) && std::isfinite(sin[i])) << theta << " " << i;
  }
  // Token ids: integers in range, or null; never truncated.
  expect_config_error("bos_token_id", (uint64_t(1) << 63) + 5, "bos_token_id is 9223372036854775813, outside the accepted range 0..16777215");
  expect_config_error("eos_token_id", 1.5, "eos_token_id is 1.5, not a whole number");
  expect_config_error("eos_token_id", json::array({1, -2}), "eos_token_id is -2");
  config = tiny_config();
  config["bos_token_id"] = nullptr;
  config["eos_token_id"] = json::array({7, 8});
  const ModelConfig c = parse_hf_config(config.dump());
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_EQ(c.eos_token_id, 7);
  // A head size derived from hidden_size / heads is checked too.
  config = tiny_config();
  config.erase("head_dim");
  config["hidden_size"] = 2;
  expect_error([&] { parse_hf_config(config.dump()); }, "config.json: head_dim is 0, outside the accepted range 2..65536");
}

TEST(HostileConfig, EndTokensOfACheckpointAreChecked) {
  const std::string dir = testing::write_checkpoint(TinyConfig{}, "hostile-end-tokens");
  testing::write_text(dir + "/generation_config.json", R"({"eos_token_id": [2, 4294967298]})");
  expect_error([&] { load_model(dir); }, "generation_config.json: eos_token_id is 4294967298, outside the accepted range 0..16777215");
  testing::write_text(dir + "/generation_config.json", R"({"eos_token_id": "2"})");
  expect_error([&] { load_model(dir); }, "generation_config.json: eos_token_id is \"2\", not a whole number");
  testing::write_text(dir + "/generation_config.json", R"({"eos_token_id": null})");
  EXPECT_TRUE(load_model(dir).stop_tokens.empty());
}

// --- GGUF metadata: integers read as integers, translated and checked as config.json -------

// A llama GGUF header with the metadata gguf_model_config reads; `replace` writes `key` instead.
std::vector<unsigned char> llama_header(const std::string& key, const std::function<void(GgufWriter&)>& replace) {
  GgufWriter g;
  const auto put = [&](const std::string& name, const std::function<void()>& normal) {
    if (name == key) replace(g);
    else normal();
  };
  g.str("general.architecture", "llama");
  put("llama.block_count", [&] { g.u32("llama.block_count", 1); });
  put("llama.context_length", [&] { g.u32("llama.context_length", 64); });
  put("llama.embedding_length", [&] { g.u32("llama.embedding_length", 32); });
  put("llama.feed_forward_length", [&] { g.u32("llama.feed_forward_length", 64); });
  put("llama.attention.head_count", [&] { g.u32("llama.attention.head_count", 2); });
  put("llama.attention.layer_norm_rms_epsilon", [&] { g.f32("llama.attention.layer_norm_rms_epsilon", 1e-5f); });
  put("llama.rope.freq_base", [&] { g.f32("llama.rope.freq_base", 10000.0f); });
  put("tokenizer.ggml.eos_token_id", [&] { g.u32("tokenizer.ggml.eos_token_id", 2); });
  g.tensor("token_embd.weight", testing::kF32, {32, 4}, std::vector<unsigned char>(32 * 4 * 4));
  return g.bytes();
}

GgufFile parse(const std::vector<unsigned char>& bytes) { return parse_gguf(std::as_bytes(std::span(bytes)), "hostile.gguf"); }

ModelConfig gguf_config(const std::vector<unsigned char>& bytes) { return gguf_model_config(parse(bytes)); }

TEST(HostileGguf, IntegersAreExactAndCheckedAsConfigJsonChecksThem) {
  EXPECT_EQ(gguf_config(llama_header("", {})).max_positions, 64u);
  // 2^53 + 1 through a double would become 2^53; read as an integer it stays itself.
  const auto exact = llama_header("llama.context_length", [](GgufWriter& g) { g.u64("llama.context_length", (uint64_t(1) << 53) + 1); });
  EXPECT_EQ(parse(exact).get_uint("llama.context_length"), (uint64_t(1) << 53) + 1);
  expect_error([&] { gguf_config(exact); },
               "GGUF: max_position_embeddings (llama.context_length) is 9007199254740993, outside the accepted range 1..268435456");
  // 2^64 - 1 as a double rounds to 2^64, which no uint64 holds (undefined behaviour before).
  expect_error([] { gguf_config(llama_header("llama.block_count", [](GgufWriter& g) { g.u64("llama.block_count", kU64Max); })); },
               "GGUF: num_hidden_layers (llama.block_count) is 18446744073709551615, outside the accepted range 1..65536");
  expect_error([] { gguf_config(llama_header("llama.block_count", [](GgufWriter& g) { g.i64("llama.block_count", -5); })); },
               "GGUF metadata 'llama.block_count' is -5, not a non-negative integer");
  expect_error([] { gguf_config(llama_header("llama.embedding_length", [](GgufWriter& g) { g.u32("llama.embedding_length", 0); })); },
               "GGUF: hidden_size (llama.embedding_length) is 0, outside the accepted range 1..1048576");
  expect_error([] { gguf_config(llama_header("llama.attention.head_count", [](GgufWriter& g) { g.f32("llama.attention.head_count", 2.0f); })); },
               "GGUF metadata 'llama.attention.head_count' is not an integer");
  // An F64 epsilon of 1e300 is refused as a double, never narrowed to a float first.
  expect_error([] { gguf_config(llama_header("llama.attention.layer_norm_rms_epsilon",
                                             [](GgufWriter& g) { g.f64("llama.attention.layer_norm_rms_epsilon", 1e300); })); },
               "GGUF: rms_norm_eps (llama.attention.layer_norm_rms_epsilon) is 1e+300, outside the accepted range 0..1");
  expect_error([] { gguf_config(llama_header("llama.rope.freq_base", [](GgufWriter& g) { g.f32("llama.rope.freq_base", 1e-30f); })); },
               "GGUF: rope_theta (llama.rope.freq_base) is 1e-30, outside the accepted range 1..3.40282e+38");
  expect_error([] { gguf_config(llama_header("tokenizer.ggml.eos_token_id", [](GgufWriter& g) { g.u64("tokenizer.ggml.eos_token_id", kU64Max); })); },
               "GGUF: eos_token_id (tokenizer.ggml.eos_token_id) is 18446744073709551615, outside the accepted range 0..16777215");
  GgufWriter alignment;
  alignment.u64("general.alignment", kU64Max);
  expect_error([&] { parse(alignment.bytes()); },
               "general.alignment 18446744073709551615 is not a power of two up to 65536");
}

TEST(HostileGguf, TensorShapesAreBounded) {
  GgufWriter huge;
  huge.tensor("t", testing::kF32, {uint64_t(1) << 40, uint64_t(1) << 10}, std::vector<unsigned char>(64));
  expect_error([&] { parse(huge.bytes()); },
               "has an absurd shape: dimension 1 is 1024 (a tensor holds 1 to 2^48 values)");
}

TEST(HostileGguf, KQuantTensorsAreWholeBlocksInsideTheFile) {
  GgufWriter rows;
  rows.tensor("t", testing::ggml_type(DType::Q4_K), {255, 2}, std::vector<unsigned char>(288));
  expect_error([&] { parse(rows.bytes()); }, "tensor 't': its rows of 255 values are not whole blocks of 256");
  GgufWriter short_data;  // two Q6_K blocks of 210 bytes, but only one in the file
  short_data.tensor("t", testing::ggml_type(DType::Q6_K), {256, 2}, std::vector<unsigned char>(210));
  expect_error([&] { parse(short_data.bytes()); }, "the data of tensor 't' (420 bytes at offset 0) runs past the end of the file");
  GgufWriter whole;
  whole.tensor("t", testing::ggml_type(DType::Q6_K), {256, 2}, std::vector<unsigned char>(420));
  EXPECT_EQ(parse(whole.bytes()).tensors.at(0).bytes, 420u);
  // The largest shape of a K-quant: 2^48 values in blocks of 256 give a size that does not wrap.
  GgufWriter huge;
  huge.tensor("t", testing::ggml_type(DType::Q2_K), {uint64_t(1) << 24, uint64_t(1) << 24}, std::vector<unsigned char>(84));
  expect_error([&] { parse(huge.bytes()); }, "the data of tensor 't' (" + std::to_string((uint64_t(1) << 40) * 84) + " bytes");
}

// A tiny llama with a tokenizer of these tokens (all normal): byte-level ("gpt2") with these
// merges, or SentencePiece ("llama").
std::string gguf_with_tokenizer(const std::string& name, const std::string& model, const std::vector<std::string>& tokens,
                                const std::vector<std::string>& merges = {}) {
  GgufWriter g = testing::tiny_llama(DType::Q4_0);
  g.str("tokenizer.ggml.model", model);
  g.str("tokenizer.ggml.pre", "smollm");
  g.strings("tokenizer.ggml.tokens", tokens);
  g.i32s("tokenizer.ggml.token_type", std::vector<int32_t>(tokens.size(), 1));
  g.strings("tokenizer.ggml.merges", merges);
  return testing::write_gguf(name, g.bytes());
}

TEST(HostileGguf, ATokenizerThatIsNotUtf8IsRefused) {
  // Found by fuzzing: a token of invalid UTF-8 made the tokenizer's JSON throw past ditto::Error.
  EXPECT_NO_THROW(load_model(gguf_with_tokenizer("hostile-utf8-ok", "gpt2", {"a", "b", "ab"}, {"a b"})));
  expect_error([] { load_model(gguf_with_tokenizer("hostile-utf8-token", "gpt2", {"a", "b", "\xff"})); },
               "GGUF: token 2 in tokenizer.ggml.tokens is not valid UTF-8");
  expect_error([] { load_model(gguf_with_tokenizer("hostile-utf8-merge", "gpt2", {"a", "b", "ab"}, {"a b", "a \xc3"})); },
               "GGUF: merge 1 in tokenizer.ggml.merges is not valid UTF-8");
}

TEST(HostileGguf, TokenizerVocabulariesAreBounded) {
  expect_error([] { load_model(gguf_with_tokenizer("hostile-no-tokens", "gpt2", {})); },
               "GGUF: the number of tokens in tokenizer.ggml.tokens is 0, outside the accepted range 1..16777216");
  // The merges of a SentencePiece vocabulary are derived from every split of every token: a token
  // of 10^6 bytes took minutes.
  expect_error([] { load_model(gguf_with_tokenizer("hostile-long-token", "llama", {"a", std::string(257, 'a')})); },
               "GGUF: token 1 of tokenizer.ggml.tokens is 257 bytes long; a SentencePiece token may have 256");
}

// --- safetensors -------------------------------------------------------------------------

TEST(HostileSafetensors, AHeaderLongerThanTheFormatAllowsIsRefusedBeforeItIsRead) {
  // A sparse file: 8 bytes of header length, then 200 MB the header claims (no disk is used).
  const std::string path = testing::temp_dir("hostile-st-header") + "/model.safetensors";
  const uint64_t length = 200'000'000;
  testing::write_file(path, std::vector<unsigned char>(reinterpret_cast<const unsigned char*>(&length),
                                                       reinterpret_cast<const unsigned char*>(&length) + 8));
  std::filesystem::resize_file(path, 8 + length);
  TensorStore store;
  expect_error([&] { load_safetensors(path, store); },
               "the header length is 200000000 bytes, outside the accepted range 0..100000000");
}

TEST(HostileSafetensors, ModelsLargerThanTheMachineAreRefusedBeforePacking) {
  // A checkpoint whose embedding is twice this machine's memory, in a sparse file: every shape is
  // right, so only the memory check stands between it and a bare "out of memory".
  TinyConfig tiny;
  tiny.layers = 1, tiny.heads = 1, tiny.kv_heads = 1, tiny.head_dim = 2, tiny.intermediate = 1, tiny.hidden = 1 << 16;
  tiny.vocab = std::max<size_t>(1, 2 * physical_memory() / (4 * tiny.hidden));
  ASSERT_LE(tiny.vocab, size_t(limits::kVocabSize.max));
  const std::string dir = testing::write_checkpoint(TinyConfig{}, "hostile-huge");
  testing::write_text(dir + "/config.json", testing::config_json(tiny));
  // The header of random_weights(tiny)'s tensors, with offsets but no data written.
  json header = json::object();
  size_t offset = 0;
  const auto add = [&](const std::string& name, std::vector<size_t> shape) {
    size_t bytes = 4;
    for (size_t d : shape) bytes *= d;
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  };
  const size_t h = tiny.hidden;
  add("model.embed_tokens.weight", {tiny.vocab, h});
  for (const char* norm : {"model.norm.weight", "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight"})
    add(norm, {h});
  add("model.layers.0.self_attn.q_proj.weight", {2, h});
  add("model.layers.0.self_attn.k_proj.weight", {2, h});
  add("model.layers.0.self_attn.v_proj.weight", {2, h});
  add("model.layers.0.self_attn.o_proj.weight", {h, 2});
  add("model.layers.0.self_attn.q_norm.weight", {2});
  add("model.layers.0.self_attn.k_norm.weight", {2});
  add("model.layers.0.mlp.gate_proj.weight", {1, h});
  add("model.layers.0.mlp.up_proj.weight", {1, h});
  add("model.layers.0.mlp.down_proj.weight", {h, 1});
  add("lm_head.weight", {tiny.vocab, h});
  const std::string text = header.dump();
  std::vector<unsigned char> bytes(8);
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = uint8_t(uint64_t(text.size()) >> (8 * i));
  bytes.insert(bytes.end(), text.begin(), text.end());
  testing::write_file(dir + "/model.safetensors", bytes);
  std::filesystem::resize_file(dir + "/model.safetensors", bytes.size() + offset);
  expect_error([&] { Model::load(dir); }, "packing the model's weights needs");
  expect_error([&] { Model::load(dir); }, "more than this machine's memory");
  // `ditto inspect` reads it: the sizes are possible, only large.
  EXPECT_NO_THROW(describe_model(dir));
}

// --- inspect: no impossible sizes reported -------------------------------------------------

TEST(HostileInspect, SizesTheTensorsDoNotHaveAreRefused) {
  const std::string dir = testing::write_checkpoint(TinyConfig{}, "hostile-inspect");
  EXPECT_NO_THROW(describe_model(dir));
  TinyConfig wider;
  wider.hidden = 1 << 20;
  testing::write_text(dir + "/config.json", testing::config_json(wider));
  expect_error([&] { describe_model(dir); }, "'model.embed_tokens.weight' has shape [96, 40] but the config implies [96, 1048576]");
  TinyConfig deeper;
  deeper.layers = 1 << 16;
  testing::write_text(dir + "/config.json", testing::config_json(deeper));
  expect_error([&] { describe_model(dir); }, "no tensor 'model.layers.2.input_layernorm.weight'");
  // A GGUF file whose metadata claims more layers than it holds.
  GgufWriter gguf = testing::tiny_llama(DType::Q4_0);
  const std::string path = testing::write_gguf("hostile-inspect", gguf.bytes());
  EXPECT_NO_THROW(describe_model(path));
  auto bytes = gguf.bytes();
  const std::string key = "llama.block_count";
  const auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end()) - bytes.begin();
  bytes[size_t(at) + key.size() + 4] = 3;  // the u32 after the key and its type: 2 layers -> 3
  expect_error([&] { describe_model(testing::write_gguf("hostile-inspect-layers", bytes)); },
               "no tensor 'blk.2.attn_norm.weight' (transformers' model.layers.2.input_layernorm.weight)");
}

// --- tokenizer.json: ids in range, never truncated; an empty vocabulary refused --------------

std::string tokenizer_json(const json& vocab, const json& added = json::array()) {
  json root = {{"version", "1.0"},
               {"added_tokens", added},
               {"normalizer", nullptr},
               {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
               {"post_processor", nullptr},
               {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
               {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", vocab}, {"merges", json::array({"a b"})}}}};
  return root.dump();
}

json vocab_with(const json& z_id) { return {{"a", 0}, {"b", 1}, {"ab", 2}, {"z", z_id}}; }

TEST(HostileTokenizer, IdsOutsideTheRangeAreRefusedNotTruncated) {
  EXPECT_EQ(Tokenizer::from_json(tokenizer_json(vocab_with(3))).encode("abz").size(), 2u);
  // 2^31 + 5 used to become a negative id, 2^32 + 1 the id 1, 2^31 - 1 overflowed max_id + 1,
  // and 10^9 asked for a table of 10^9 entries.
  for (const json& id : {json((uint64_t(1) << 31) + 5), json((uint64_t(1) << 32) + 1), json((int64_t(1) << 31) - 1),
                        json(1000000000), json(-1)})
    expect_error([&] { Tokenizer::from_json(tokenizer_json(vocab_with(id))); },
                 "the id of vocabulary token \"z\" is " + id.dump() + ", outside the accepted range 0..16777215");
  expect_error([] { Tokenizer::from_json(tokenizer_json(vocab_with(3.0))); }, "the id of vocabulary token \"z\" is 3.0, not a whole number");
  expect_error([] { Tokenizer::from_json(tokenizer_json(vocab_with("3"))); }, "is \"3\", not a whole number");
  // An added token whose id wraps to the expected one (2^32 + 4 -> 4) is not accepted.
  const json added = json::array({{{"id", (uint64_t(1) << 32) + 4}, {"content", "<x>"}, {"special", true}}});
  expect_error([&] { Tokenizer::from_json(tokenizer_json(vocab_with(3), added)); },
               "the id of an added token is 4294967300, outside the accepted range 0..16777215");
}

TEST(HostileTokenizer, ThePostProcessorsIdsAreCheckedNotTruncated) {
  json root = json::parse(tokenizer_json(vocab_with(3)));
  const auto with_id = [&](const json& id) {
    root["post_processor"] = {{"type", "TemplateProcessing"},
                              {"single", {{{"SpecialToken", {{"id", "a"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                              {"pair", json::array()},
                              {"special_tokens", {{"a", {{"id", "a"}, {"ids", {id}}, {"tokens", {"a"}}}}}}};
    return root.dump();
  };
  EXPECT_EQ(Tokenizer::from_json(with_id(0)).encode("b", true, true), (std::vector<int32_t>{0, 1}));
  // 2^32 + 1 used to become the id 1.
  expect_error([&] { Tokenizer::from_json(with_id((uint64_t(1) << 32) + 1)); },
               "post_processor TemplateProcessing: an id of \"a\" is 4294967297, outside the accepted range 0..16777215");
  expect_error([&] { Tokenizer::from_json(with_id(1.0)); }, "an id of \"a\" is 1.0, not a whole number");
}

// A byte-fallback tokenizer (the 256 byte tokens and "▁") whose decoder ends with `strip`.
std::string byte_fallback_tokenizer_json(const json& strip) {
  json vocab = json::object();
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    vocab[name] = byte;
  }
  vocab["\u2581"] = 256;
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}};
  json root = {{"version", "1.0"},
               {"added_tokens", json::array()},
               {"normalizer", nullptr},
               {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", false}}},
               {"post_processor", nullptr},
               {"decoder", {{"type", "Sequence"}, {"decoders", {replace, {{"type", "ByteFallback"}}, {{"type", "Fuse"}}, strip}}}},
               {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"byte_fallback", true}, {"vocab", vocab}, {"merges", json::array()}}}};
  return root.dump();
}

TEST(HostileTokenizer, TheDecodersStripIsAWholeNumberInRange) {
  const auto strip = [](const json& start, const json& stop) {
    return byte_fallback_tokenizer_json({{"type", "Strip"}, {"content", " "}, {"start", start}, {"stop", stop}});
  };
  const Tokenizer tokenizer = Tokenizer::from_json(strip(1, 0));
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("hi")), "hi");  // the "▁" put before it comes off again
  expect_error([&] { Tokenizer::from_json(strip(-1, 0)); }, "decoder Strip's start is -1, outside the accepted range 0..65536");
  expect_error([&] { Tokenizer::from_json(strip(1.5, 0)); }, "decoder Strip's start is 1.5, not a whole number");
  // 2^32 used to pass as a stop of 0.
  expect_error([&] { Tokenizer::from_json(strip(1, uint64_t(1) << 32)); },
               "decoder Strip's stop is 4294967296, outside the accepted range 0..65536");
  expect_error([&] { Tokenizer::from_json(strip(1, 1)); }, "decoder Strip of the end of the text is not supported");
}

TEST(HostileTokenizer, AnEmptyVocabularyIsRefused) {
  expect_error([] { Tokenizer::from_json(tokenizer_json(json::object())); }, "the vocabulary is empty");
  expect_error([] { Tokenizer::from_json(tokenizer_json(json::array())); }, "a vocab that is not an object is not supported");
}

// --- JSON documents: nesting bounded -----------------------------------------------------

std::string nested_arrays(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(HostileJson, DocumentsNestedTooDeepAreRefusedBeforeAnythingRecurses) {
  EXPECT_EQ(parse_json(nested_arrays(256), "x").dump(), nested_arrays(256));
  std::string objects;
  for (int i = 0; i < 256; ++i) objects += "{\"a\":";
  EXPECT_NO_THROW(parse_json(objects + "1" + std::string(256, '}'), "x"));
  expect_error([] { parse_json(nested_arrays(257), "x"); }, "x nests arrays and objects more than 256 deep");
  expect_error([&] { parse_json("{\"a\":" + objects + "1" + std::string(257, '}'), "x"); }, "x nests arrays");
  expect_error([] { parse_json("[1,", "x"); }, "x is not valid JSON: ");
  // A million levels overflowed the stack when the value was copied or printed: config.json,
  // tokenizer.json and a safetensors header alike.
  const std::string deep = nested_arrays(1'000'000);
  json config = tiny_config();
  config["vocab_size"] = nullptr;
  std::string text = config.dump();
  text.replace(text.find("null"), 4, deep);
  expect_error([&] { parse_hf_config(text); }, "config.json nests arrays and objects more than 256 deep");
  text = tokenizer_json(vocab_with(3));
  text.replace(text.find("null"), 4, deep);
  expect_error([&] { Tokenizer::from_json(text); }, "the file nests arrays and objects more than 256 deep");
  const std::string header = "{\"__metadata__\":" + deep + "}";
  std::vector<std::byte> file(8 + header.size());
  for (int i = 0; i < 8; ++i) file[size_t(i)] = std::byte(uint64_t(header.size()) >> (8 * i));
  std::memcpy(file.data() + 8, header.data(), header.size());
  expect_error([&] { parse_safetensors(file, "'deep.safetensors'"); },
               "'deep.safetensors': the header nests arrays and objects more than 256 deep");
}

// --- token ids given as text (prompts, detokenize) ----------------------------------------

TEST(HostileTokenIds, TextIdsAreWholeNumbersInRange) {
  EXPECT_EQ(parse_token_ids(" 0 16777215\n7 "), (std::vector<int32_t>{0, 16777215, 7}));
  expect_error([] { parse_token_ids("1 -1"); }, "a token id is -1, outside the accepted range 0..16777215");
  expect_error([] { parse_token_ids("4294967297"); }, "a token id is 4294967297, outside the accepted range 0..16777215");
  expect_error([] { parse_token_ids("99999999999999999999999"); }, "'99999999999999999999999' is not a token id (a whole number in 0..16777215)");
  expect_error([] { parse_token_ids("12abc"); }, "'12abc' is not a token id");
  expect_error([] { parse_token_ids("1e3"); }, "'1e3' is not a token id");
}

}  // namespace
}  // namespace ditto
