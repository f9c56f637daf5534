#include "test_checkpoint.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ditto/error.h"

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

namespace {

// Where a block keeps its f16 factors, and the largest integer each multiplies.
struct F16Factors {
  size_t scale_at;
  float scale_multiplier;
  int minimum_at = -1;  // none
  float minimum_multiplier = 1.0f;
};

F16Factors f16_factors(DType dtype) {
  switch (dtype) {
    case DType::Q8_0: return {0, 128};
    case DType::Q4_0: return {0, 8};
    case DType::Q4_1: return {0, 15, 2, 1};
    case DType::Q5_0: return {0, 16};
    case DType::Q5_1: return {0, 31, 2, 1};
    case DType::Q2_K: return {80, 15 * 3, 82, 15};
    case DType::Q3_K: return {108, 32 * 4};
    case DType::Q4_K: return {0, 63 * 15, 2, 63};
    case DType::Q5_K: return {0, 63 * 31, 2, 63};
    case DType::Q6_K: return {208, 128 * 32};
    default: throw Error("not a quantised type: " + dtype_name(dtype));
  }
}

}  // namespace

std::vector<unsigned char> random_quant_blocks(DType dtype, size_t values, uint64_t seed, float bound,
                                               bool any_finite_factors) {
  SplitMix64 rng(seed);
  std::vector<unsigned char> bytes(dtype_bytes(dtype, values));
  for (auto& b : bytes) b = uint8_t(rng.next());
  const F16Factors factors = f16_factors(dtype);
  const auto factor = [&](float multiplier) {
    if (!any_finite_factors) return f32_to_f16(rng.uniform(bound / multiplier));
    uint16_t bits;
    do bits = uint16_t(rng.next()); while ((bits & 0x7c00u) == 0x7c00u);  // not infinity or NaN
    return bits;
  };
  for (size_t at = 0; at < bytes.size(); at += dtype_block_bytes(dtype)) {
    const uint16_t scale = factor(factors.scale_multiplier);
    std::memcpy(&bytes[at + factors.scale_at], &scale, 2);
    if (factors.minimum_at >= 0) {
      const uint16_t minimum = factor(factors.minimum_multiplier);
      std::memcpy(&bytes[at + size_t(factors.minimum_at)], &minimum, 2);
    }
  }
  return bytes;
}

size_t f16_scale_at(DType dtype) { return f16_factors(dtype).scale_at; }
int f16_minimum_at(DType dtype) { return f16_factors(dtype).minimum_at; }

std::pair<size_t, size_t> integer_factors_at(DType dtype) {
  switch (dtype) {
    case DType::Q2_K: return {0, 16};
    case DType::Q3_K: return {96, 12};
    case DType::Q4_K:
    case DType::Q5_K: return {4, 12};
    case DType::Q6_K: return {192, 16};
    default: return {0, 0};
  }
}

bool set_nan_minimums(DType dtype, std::vector<unsigned char>& blocks) {
  const int minimum_at = f16_minimum_at(dtype);
  if (minimum_at < 0) return false;
  // f16 NaNs, positive and negative, quiet and signalling (with a payload the widening keeps).
  const uint16_t nans[] = {0x7e00, 0xfe00, 0x7d01, 0xfc81};
  const size_t block_bytes = dtype_block_bytes(dtype);
  for (size_t block = 0; block * block_bytes < blocks.size(); block += 4)
    std::memcpy(&blocks[block * block_bytes + size_t(minimum_at)], &nans[block / 4 % 4], 2);
  return true;
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

namespace {
// The directories temp_dir made in this process, removed when it exits: a run of the suite left
// about a gigabyte of models behind in the temporary directory otherwise.
struct MadeDirectories {
  std::vector<std::filesystem::path> paths;
  ~MadeDirectories() {
    std::error_code ignored;  // (nothing to report to at exit)
    for (const auto& path : paths) std::filesystem::remove_all(path, ignored);
  }
};
MadeDirectories made_directories;
}  // namespace

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("ditto-test-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  made_directories.paths.push_back(dir);
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
  if (c.llama3_rope)
    config["rope_parameters"] = {{"rope_theta", 500000.0},       {"rope_type", "llama3"},
                                 {"factor", 8.0},                {"low_freq_factor", 1.0},
                                 {"high_freq_factor", 4.0},      {"original_max_position_embeddings", 64}};
  if (c.arch != "llama") config["sliding_window"] = c.window ? nlohmann::json(c.window) : nlohmann::json();
  if (c.arch == "qwen2" || c.arch == "qwen3" || c.arch == "qwen3_moe") config["use_sliding_window"] = c.window != 0;
  if (c.arch == "qwen2" || c.arch == "qwen3") config["max_window_layers"] = 1;
  if (c.arch == "mixtral") config.update({{"num_local_experts", c.experts}, {"num_experts_per_tok", c.experts_per_token}});
  if (c.arch == "qwen3_moe")
    config.update({{"num_experts", c.experts}, {"num_experts_per_tok", c.experts_per_token},
                   {"moe_intermediate_size", c.expert_intermediate}, {"norm_topk_prob", c.norm_topk_prob}});
  if (c.arch == "gemma3_text") {
    config.erase("hidden_act");
    config["hidden_activation"] = "gelu_pytorch_tanh";
    config["sliding_window"] = 8;
    config["sliding_window_pattern"] = 2;
    config["query_pre_attn_scalar"] = 24;
    config["final_logit_softcapping"] = 3.0;
    config["rope_parameters"] = {{"full_attention", {{"rope_theta", 1e6}, {"rope_type", "default"}}},
                                 {"sliding_attention", {{"rope_theta", 1e4}, {"rope_type", "default"}}}};
  }
  return config.dump(2);
}

TinyConfig tiny_family(const std::string& arch) {
  TinyConfig c;
  c.arch = arch;
  if (arch == "qwen2") c.window = 5;
  if (arch == "mistral") c.window = 7, c.kv_heads = 1, c.dtype = DType::F32;
  if (arch == "phi3") c.dtype = DType::F16, c.tied = true;
  if (arch == "llama") c.llama3_rope = true;
  if (arch == "mixtral") c.intermediate = 24;
  if (arch == "qwen3_moe") c.experts = 5, c.experts_per_token = 1, c.norm_topk_prob = false;
  if (arch == "gemma3_text") c.layers = 3;
  return c;
}

TinyConfig wide_gemma3() {
  TinyConfig c = tiny_family("gemma3_text");
  c.head_dim = 256;
  c.kv_heads = 1;
  return c;
}

std::vector<TestTensor> random_weights(const TinyConfig& c) {
  SplitMix64 rng(c.seed);
  const std::string dtype = c.dtype == DType::F32 ? "F32" : c.dtype == DType::F16 ? "F16" : "BF16";
  std::vector<TestTensor> tensors;
  // Matrices get scale 2/sqrt(cols), so that activations stay of order one; norms act in
  // [0.5, 1.5) (Gemma's as 1 + w), biases lie in [-0.5, 0.5).
  const bool gemma = c.arch == "gemma3_text";
  auto add = [&](const std::string& name, std::vector<size_t> shape) {
    const size_t count = shape.size() == 1 ? shape[0] : shape[0] * shape[1];
    const float scale = shape.size() == 1 ? 0.5f : 2.0f / std::sqrt(float(shape[1]));
    const bool norm = shape.size() == 1 && name.find(".bias") == std::string::npos;
    const float offset = norm && !gemma ? 1.0f : 0.0f;
    TestTensor t{name, dtype, shape, std::vector<unsigned char>(count * dtype_size(c.dtype))};
    for (size_t i = 0; i < count; ++i) store_from_f32(t.bytes.data(), c.dtype, i, offset + rng.uniform(scale));
    tensors.push_back(std::move(t));
  };
  const size_t q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
  const bool moe = c.arch == "mixtral" || c.arch == "qwen3_moe";
  add("model.embed_tokens.weight", {c.vocab, c.hidden});
  for (size_t l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {c.hidden});
    if (c.arch == "phi3") {
      add(p + "self_attn.qkv_proj.weight", {q + 2 * kv, c.hidden});
    } else {
      add(p + "self_attn.q_proj.weight", {q, c.hidden});
      add(p + "self_attn.k_proj.weight", {kv, c.hidden});
      add(p + "self_attn.v_proj.weight", {kv, c.hidden});
    }
    if (c.arch == "qwen2")
      for (const char* proj : {"q", "k", "v"}) add(p + "self_attn." + proj + "_proj.bias", {proj[0] == 'q' ? q : kv});
    add(p + "self_attn.o_proj.weight", {c.hidden, q});
    if (c.arch == "qwen3" || c.arch == "qwen3_moe" || gemma) {
      add(p + "self_attn.q_norm.weight", {c.head_dim});
      add(p + "self_attn.k_norm.weight", {c.head_dim});
    }
    add(p + "post_attention_layernorm.weight", {c.hidden});
    if (gemma) {
      add(p + "pre_feedforward_layernorm.weight", {c.hidden});
      add(p + "post_feedforward_layernorm.weight", {c.hidden});
    }
    if (moe) {
      const bool mixtral = c.arch == "mixtral";
      const std::string block = p + (mixtral ? "block_sparse_moe." : "mlp.");
      const size_t width = mixtral ? c.intermediate : c.expert_intermediate;
      add(block + "gate.weight", {c.experts, c.hidden});
      for (size_t e = 0; e < c.experts; ++e) {
        const std::string expert = block + "experts." + std::to_string(e) + ".";
        add(expert + (mixtral ? "w1" : "gate_proj") + ".weight", {width, c.hidden});
        add(expert + (mixtral ? "w3" : "up_proj") + ".weight", {width, c.hidden});
        add(expert + (mixtral ? "w2" : "down_proj") + ".weight", {c.hidden, width});
      }
    } else if (c.arch == "phi3") {
      add(p + "mlp.gate_up_proj.weight", {2 * c.intermediate, c.hidden});
      add(p + "mlp.down_proj.weight", {c.hidden, c.intermediate});
    } else {
      add(p + "mlp.gate_proj.weight", {c.intermediate, c.hidden});
      add(p + "mlp.up_proj.weight", {c.intermediate, c.hidden});
      add(p + "mlp.down_proj.weight", {c.hidden, c.intermediate});
    }
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
