// Mixtral (transformers' MixtralForCausalLM): Mistral's attention, and in every layer a mixture
// of num_local_experts SwiGLU experts of which a router picks num_experts_per_tok per row, their
// weights the router's softmax renormalised over the chosen ones. llama.cpp writes its GGUF files
// as `llama` with experts.
#include "model/architecture.h"

namespace ditto {

namespace {

const ExpertNames kMixtralExperts{"block_sparse_moe.gate.weight", "block_sparse_moe.experts.", "w1.weight", "w3.weight",
                                  "w2.weight"};

}  // namespace

const Architecture& mixtral_architecture() {
  static const Architecture mixtral{
      .name = "mixtral",
      .gguf_name = "llama",
      .gguf_qk_layout = QkLayout::InterleavedRope,
      .read_config =
          [](const ConfigFields& config, ModelConfig& c) {
            read_sliding_window(config, c, 0);
            read_experts(config, "num_local_experts", "intermediate_size", c);
            c.normalize_top_k = true;
          },
      .experts = &kMixtralExperts,
  };
  return mixtral;
}

}  // namespace ditto
