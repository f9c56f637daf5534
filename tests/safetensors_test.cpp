// Bad checkpoints get a clear ditto::Error, never a crash (this file also runs under ASan/UBSan).
#include <gtest/gtest.h>

#include <filesystem>

#include "ditto/error.h"
#include "ditto/model.h"
#include "model/config.h"
#include "model/tensor_store.h"
#include "expect_error.h"
#include "test_checkpoint.h"

#include <nlohmann/json.hpp>

namespace ditto {
namespace {

using testing::expect_error;

using testing::TestTensor;
using testing::TinyConfig;

std::string write_bytes(const std::string& name, const std::vector<unsigned char>& bytes) {
  const std::string path = testing::temp_dir("st-" + name) + "/model.safetensors";
  testing::write_file(path, bytes);
  return path;
}

void load(const std::string& path) {
  TensorStore store;
  load_safetensors(path, store);
}

TestTensor f32_tensor(const std::string& name, std::vector<size_t> shape) {
  size_t count = 1;
  for (size_t d : shape) count *= d;
  return {name, "F32", shape, std::vector<unsigned char>(count * 4)};
}

std::vector<unsigned char> with_header(const std::string& json, size_t data_bytes) {
  std::vector<unsigned char> out(8);
  for (int i = 0; i < 8; ++i) out[i] = (uint64_t(json.size()) >> (8 * i)) & 0xff;
  out.insert(out.end(), json.begin(), json.end());
  out.resize(out.size() + data_bytes);
  return out;
}

TEST(Safetensors, ReadsAValidFile) {
  const auto path = write_bytes("valid", testing::safetensors_bytes({f32_tensor("a", {2, 3}), f32_tensor("b", {5})}));
  TensorStore store;
  load_safetensors(path, store);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.get("a").shape, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(store.get("b").bytes, 20u);
}

TEST(Safetensors, TruncatedFiles) {
  const auto bytes = testing::safetensors_bytes({f32_tensor("a", {4, 4})});
  expect_error([&] { load(write_bytes("empty", {})); }, "shorter than its 8-byte header length");
  expect_error([&] { load(write_bytes("short", {1, 2, 3})); }, "shorter than its 8-byte header length");
  // Cut inside the data: the offsets now run past the end.
  expect_error([&] { load(write_bytes("cut-data", {bytes.begin(), bytes.end() - 4})); }, "outside the");
  // Cut inside the header.
  expect_error([&] { load(write_bytes("cut-header", {bytes.begin(), bytes.begin() + 20})); }, "runs past the end");
}

TEST(Safetensors, HeaderLengthPastTheEnd) {
  auto bytes = testing::safetensors_bytes({f32_tensor("a", {2})});
  bytes[7] = 0x7f;  // a header length of ~9e18 bytes
  expect_error([&] { load(write_bytes("huge-header", bytes)); }, "runs past the end");
}

TEST(Safetensors, CorruptHeaders) {
  expect_error([&] { load(write_bytes("not-json", with_header("{not json", 0))); }, "not valid JSON");
  expect_error([&] { load(write_bytes("array", with_header("[1,2]", 0))); }, "not a JSON object");
  expect_error([&] { load(write_bytes("no-offsets", with_header(R"({"a":{"dtype":"F32","shape":[1]}})", 4))); },
               "needs a dtype, a shape and two data_offsets");
  expect_error(
      [&] { load(write_bytes("neg-dim", with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4))); },
      "not a non-negative integer");
  expect_error([&] {
    load(write_bytes("absurd", with_header(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4)));
  }, "absurdly large");
}

TEST(Safetensors, OffsetsOutOfRangeOrInconsistent) {
  expect_error([&] { load(write_bytes("past", with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4))); },
               "outside the 4 bytes");
  expect_error(
      [&] { load(write_bytes("reversed", with_header(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", 4))); },
      "outside the");
  expect_error([&] { load(write_bytes("size", with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8))); },
               "holds 8 bytes but its shape and dtype need 12");
}

TEST(Safetensors, OverlappingTensors) {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  expect_error([&] { load(write_bytes("overlap", with_header(header, 12))); }, "overlap");
}

TEST(Safetensors, UnknownDtype) {
  expect_error([&] { load(write_bytes("dtype", with_header(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8))); },
               "has dtype 'I64'");
}

// Model-level checks: the checkpoint must match its config.
class BadCheckpoint : public ::testing::Test {
 protected:
  std::string dir = testing::write_checkpoint(TinyConfig{}, "bad-checkpoint");
  std::vector<TestTensor> weights = testing::random_weights(TinyConfig{});
  void rewrite(const std::vector<TestTensor>& tensors) {
    testing::write_file(dir + "/model.safetensors", testing::safetensors_bytes(tensors));
  }
};

TEST_F(BadCheckpoint, MissingTensor) {
  weights.erase(weights.begin() + 3);  // model.layers.0.self_attn.k_proj.weight
  rewrite(weights);
  expect_error([&] { Model::load(dir); }, "no tensor 'model.layers.0.self_attn.k_proj.weight'");
}

TEST_F(BadCheckpoint, ShapeDisagreesWithConfig) {
  TinyConfig other;
  other.intermediate = 80;
  rewrite(testing::random_weights(other));
  expect_error([&] { Model::load(dir); }, "model.layers.0.mlp.gate_proj.weight' has shape [80, 40] but the config implies [72, 40]");
}

TEST_F(BadCheckpoint, UnknownArchitecture) {
  TinyConfig other;
  other.arch = "mamba";
  testing::write_text(dir + "/config.json", testing::config_json(other));
  expect_error([&] { Model::load(dir); }, "architecture (model_type) 'mamba' is not supported");
}

TEST_F(BadCheckpoint, MissingFiles) {
  std::filesystem::remove(dir + "/model.safetensors");
  expect_error([&] { Model::load(dir); }, "neither model.safetensors nor model.safetensors.index.json");
  std::filesystem::remove(dir + "/config.json");
  expect_error([&] { Model::load(dir); }, "no readable config.json");
  expect_error([&] { Model::load(dir + "/nowhere"); }, "is not a checkpoint directory");
}

TEST(Config, RefusesWhatTheDecoderDoesNotImplement) {
  const std::string base = testing::config_json(TinyConfig{});
  auto with = [&](const std::string& key_value) { return base.substr(0, base.size() - 2) + ",\n" + key_value + "}"; };
  expect_error([&] { parse_hf_config(with(R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0})")); },
               "rope scaling of type 'yarn' is not supported");
  auto scaled = nlohmann::json::parse(base);
  scaled["rope_parameters"]["rope_type"] = "llama3";
  expect_error([&] { parse_hf_config(scaled.dump()); }, "config.json: rope_parameters: factor is missing");
  auto biased = nlohmann::json::parse(base);
  biased["attention_bias"] = true;
  expect_error([&] { parse_hf_config(biased.dump()); }, "attention_bias");
  auto gqa = nlohmann::json::parse(base);
  gqa["num_key_value_heads"] = 3;
  expect_error([&] { parse_hf_config(gqa.dump()); }, "multiple of num_key_value_heads");
  auto typed = nlohmann::json::parse(base);
  typed["hidden_size"] = "forty";
  expect_error([&] { parse_hf_config(typed.dump()); }, "config.json: hidden_size is \"forty\", not a whole number in 1..1048576");
  expect_error([&] { parse_hf_config("{"); }, "not valid JSON");
  auto eps = nlohmann::json::parse(base);
  eps["rms_norm_eps"] = -1e-6;
  expect_error([&] { parse_hf_config(eps.dump()); }, "config.json: rms_norm_eps is -1e-06, outside the accepted range 0..1");
}

TEST(Config, ReadsOldAndNewRopeSpellings) {
  auto config = nlohmann::json::parse(testing::config_json(TinyConfig{}));
  config["rope_parameters"]["rope_theta"] = 1000000.0;
  EXPECT_EQ(parse_hf_config(config.dump()).rope_theta, 1000000.0);
  config.erase("rope_parameters");
  config["rope_theta"] = 500000.0;
  config["rope_scaling"] = nullptr;
  EXPECT_EQ(parse_hf_config(config.dump()).rope_theta, 500000.0);
}

}  // namespace
}  // namespace ditto
