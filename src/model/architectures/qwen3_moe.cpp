// Qwen3-MoE (transformers' Qwen3MoeForCausalLM): Qwen3's attention, and a mixture of num_experts
// SwiGLU experts of moe_intermediate_size in the sparse layers (every decoder_sparse_step-th,
// less mlp_only_layers; the others keep a dense MLP of intermediate_size). The chosen experts'
// softmax weights are renormalised only with norm_topk_prob.
#include "model/architecture.h"

#include "ditto/error.h"

namespace ditto {

namespace {

const ExpertNames kQwen3MoeExperts{"mlp.gate.weight", "mlp.experts.", "gate_proj.weight", "up_proj.weight",
                                   "down_proj.weight"};

void read_qwen3_moe(const ConfigFields& config, ModelConfig& c) {
  c.qk_norm = true;
  // Qwen3-MoE's attention takes the window in every layer (it has no max_window_layers).
  if (config.flag("use_sliding_window", false)) read_sliding_window(config, c, 4096);
  // transformers 5 saves num_experts as num_local_experts.
  read_experts(config, config.given("num_experts") ? "num_experts" : "num_local_experts", "moe_intermediate_size", c);
  c.normalize_top_k = config.flag("norm_topk_prob", false);
  const size_t step = config.size("decoder_sparse_step", limits::kLayers, size_t(1));
  for (size_t l = 0; l < c.layers; ++l) c.sparse_layers[l] = (l + 1) % step == 0;
  if (config.given("mlp_only_layers")) {
    const nlohmann::json& dense = config.json()["mlp_only_layers"];
    if (!dense.is_array()) throw Error(config.field("mlp_only_layers") + " must be a list of layer indices");
    for (const nlohmann::json& layer : dense)
      c.sparse_layers[size_t(json_integer(layer, config.field("mlp_only_layers"), {0, int64_t(c.layers) - 1}))] = false;
  }
}

}  // namespace

const Architecture& qwen3_moe_architecture() {
  static const Architecture qwen3_moe{
      .name = "qwen3_moe",
      .gguf_name = "qwen3moe",
      .gguf_qk_layout = QkLayout::Transformers,
      .read_config = read_qwen3_moe,
      .experts = &kQwen3MoeExperts,
  };
  return qwen3_moe;
}

}  // namespace ditto
