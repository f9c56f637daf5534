// Gemma 3 (transformers' Gemma3ForCausalLM, model_type gemma3_text; llama.cpp's gemma3): the
// Qwen3 block with RMSNorms whose weights act as 1 + w, a second norm on the attention and on
// the MLP output before each residual add, a GELU-tanh MLP, the embedding scaled by
// sqrt(hidden_size), scores scaled by query_pre_attn_scalar^-1/2, and local layers of sliding-
// window attention (with their own RoPE base) between global ones.
#include <cmath>

#include "ditto/error.h"
#include "model/architecture.h"

namespace ditto {

namespace {

using nlohmann::json;

// The RoPE base of one layer type: since transformers 5 in rope_parameters[layer_type], before
// in `legacy_key` (rope_theta, rope_local_base_freq); `fallback` is transformers' default. Only
// plain RoPE: Gemma 3 4B and larger scale their global layers linearly, which ditto refuses.
double rope_base(const ConfigFields& config, const char* layer_type, const char* legacy_key, double fallback) {
  double theta = config.number(legacy_key, limits::kMinRopeTheta, limits::kMaxRopeTheta, fallback);
  const json& parameters = config.json().value("rope_parameters", json());
  if (parameters.is_object() && parameters.contains(layer_type)) {
    const FieldNames none;
    const ConfigFields rope(parameters[layer_type], config.source() + ": rope_parameters." + layer_type, none);
    const std::string type = rope.json().value("rope_type", std::string("default"));
    if (type != "default")
      throw Error(rope.source() + ": rope scaling of type '" + type + "' is not supported (only plain RoPE)");
    theta = rope.number("rope_theta", limits::kMinRopeTheta, limits::kMaxRopeTheta, theta);
  }
  return theta;
}

void read_gemma3_config(const ConfigFields& config, ModelConfig& c) {
  c.qk_norm = true;
  c.norm_adds_one = true;
  c.post_norms = true;
  const std::string activation = config.json().value("hidden_activation", std::string("gelu_pytorch_tanh"));
  if (activation != "gelu_pytorch_tanh")
    throw Error(config.field("hidden_activation") + " '" + activation + "' is not supported (only gelu_pytorch_tanh)");
  c.activation = ModelConfig::Activation::GeluTanh;
  // transformers multiplies by hidden_size ** 0.5 rounded to f32 (the embedding's dtype when
  // computing in f32), llama.cpp by sqrtf(n_embd): the same float.
  c.embedding_scale = float(std::sqrt(double(c.hidden_size)));
  c.query_pre_attn_scalar =
      config.number("query_pre_attn_scalar", limits::kMinQueryPreAttnScalar, limits::kMaxQueryPreAttnScalar, 256.0);
  c.final_logit_softcap =
      float(config.number("final_logit_softcapping", limits::kMinSoftcap, limits::kMaxSoftcap, 0.0));
  if (config.given("attn_logit_softcapping"))
    throw Error(config.field("attn_logit_softcapping") + ": softcapped attention scores are not supported");
  config.refuse_if_true("use_bidirectional_attention", "bidirectional attention");

  c.rope_theta = rope_base(config, "full_attention", "rope_theta", 1e6);
  c.rope_local_theta = rope_base(config, "sliding_attention", "rope_local_base_freq", 1e4);
  // Sliding layers as layer_types says, or else every layer but each sliding_window_pattern-th.
  std::vector<bool> sliding(c.layers);
  if (config.given("layer_types")) {
    sliding = read_layer_types(config, c.layers);
  } else {
    const size_t pattern = config.size("sliding_window_pattern", limits::kLayers, size_t(6));
    for (size_t l = 0; l < c.layers; ++l) sliding[l] = (l + 1) % pattern != 0;
  }
  const size_t window = config.size("sliding_window", limits::kPositions, size_t(4096));
  c.sliding_windows.assign(c.layers, 0);
  for (size_t l = 0; l < c.layers; ++l)
    if (sliding[l]) c.sliding_windows[l] = window;
}

// llama.cpp's gemma3 files keep only the window of the local layers (kGgufKeys): the rest is
// what llama.cpp assumes for every gemma3 file (llama-model.cpp), so ditto assumes it too. Every
// sixth layer global, local layers with RoPE base 10000, and scores scaled by 1/sqrt(head_dim)
// except in the 62-layer 27B, whose query_pre_attn_scalar is hidden_size / heads.
constexpr GgufKey kGgufKeys[] = {{"attention.sliding_window", "sliding_window", true}};

void gemma3_gguf_conventions(json& config) {
  config["sliding_window_pattern"] = 6;
  config["rope_local_base_freq"] = 10000.0;
  const uint64_t hidden = config["hidden_size"], heads = config["num_attention_heads"];
  if (config["num_hidden_layers"] != 62 && config.contains("head_dim"))
    config["query_pre_attn_scalar"] = config["head_dim"];
  else if (heads != 0)  // (0 heads are refused by the config reader)
    config["query_pre_attn_scalar"] = hidden / heads;
}

// llama.cpp's names of the two norms Llama has no counterpart for, and of the MLP's input norm,
// which is post_attention_layernorm in Llama's names.
const std::pair<const char*, const char*> kGgufBlockTensors[] = {
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
};

}  // namespace

const Architecture& gemma3_architecture() {
  static const Architecture gemma3{.name = "gemma3_text",
                                   .gguf_name = "gemma3",
                                   .gguf_qk_layout = QkLayout::Transformers,
                                   .read_config = read_gemma3_config,
                                   .gguf_keys = kGgufKeys,
                                   .gguf_conventions = gemma3_gguf_conventions,
                                   .gguf_block_tensors = kGgufBlockTensors};
  return gemma3;
}

}  // namespace ditto
