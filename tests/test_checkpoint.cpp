#include "test_checkpoint.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace ditto::testing {

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float SplitMix64::uniform(float scale) {
  const int32_t integer = int32_t(next() >> 40) - (1 << 23);  // [-2^23, 2^23)
  return float(integer) * (scale / 8388608.0f);
}

std::vector<unsigned char> safetensors_bytes(const std::vector<TestTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const TestTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';
  std::vector<unsigned char> out(8);
  for (int i = 0; i < 8; ++i) out[i] = (uint64_t(text.size()) >> (8 * i)) & 0xff;
  out.insert(out.end(), text.begin(), text.end());
  for (const TestTensor& t : tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

void write_file(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("ditto-test-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string config_json(const TinyConfig& c) {
  nlohmann::json config = {
      {"model_type", c.arch},
      {"vocab_size", c.vocab},
      {"hidden_size", c.hidden},
      {"intermediate_size", c.intermediate},
      {"num_hidden_layers", c.layers},
      {"num_attention_heads", c.heads},
      {"num_key_value_heads", c.kv_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", 512},
      {"rms_norm_eps", 1e-6},
      {"rope_parameters", {{"rope_theta", 10000.0}, {"rope_type", "default"}}},
      {"tie_word_embeddings", c.tied},
      {"hidden_act", "silu"},
  };
  return config.dump(2);
}

std::vector<TestTensor> random_weights(const TinyConfig& c) {
  SplitMix64 rng(c.seed);
  const std::string dtype = c.dtype == DType::F32 ? "F32" : c.dtype == DType::F16 ? "F16" : "BF16";
  std::vector<TestTensor> tensors;
  // Matrices get scale 2/sqrt(cols), so that activations stay of order one; norms lie in [0.5, 1.5).
  auto add = [&](const std::string& name, std::vector<size_t> shape) {
    const size_t count = shape.size() == 1 ? shape[0] : shape[0] * shape[1];
    const float scale = shape.size() == 1 ? 0.5f : 2.0f / std::sqrt(float(shape[1]));
    TestTensor t{name, dtype, shape, std::vector<unsigned char>(count * dtype_size(c.dtype))};
    for (size_t i = 0; i < count; ++i)
      store_from_f32(t.bytes.data(), c.dtype, i, (shape.size() == 1 ? 1.0f : 0.0f) + rng.uniform(scale));
    tensors.push_back(std::move(t));
  };
  const size_t q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
  add("model.embed_tokens.weight", {c.vocab, c.hidden});
  for (size_t l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {c.hidden});
    add(p + "self_attn.q_proj.weight", {q, c.hidden});
    add(p + "self_attn.k_proj.weight", {kv, c.hidden});
    add(p + "self_attn.v_proj.weight", {kv, c.hidden});
    add(p + "self_attn.o_proj.weight", {c.hidden, q});
    if (c.arch == "qwen3") {
      add(p + "self_attn.q_norm.weight", {c.head_dim});
      add(p + "self_attn.k_norm.weight", {c.head_dim});
    }
    add(p + "post_attention_layernorm.weight", {c.hidden});
    add(p + "mlp.gate_proj.weight", {c.intermediate, c.hidden});
    add(p + "mlp.up_proj.weight", {c.intermediate, c.hidden});
    add(p + "mlp.down_proj.weight", {c.hidden, c.intermediate});
  }
  add("model.norm.weight", {c.hidden});
  if (!c.tied) add("lm_head.weight", {c.vocab, c.hidden});
  return tensors;
}

std::string write_checkpoint(const TinyConfig& c, const std::string& name) {
  const std::string dir = temp_dir(name);
  write_text(dir + "/config.json", config_json(c));
  write_file(dir + "/model.safetensors", safetensors_bytes(random_weights(c)));
  return dir;
}

}  // namespace ditto::testing
