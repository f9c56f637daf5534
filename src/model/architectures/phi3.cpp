// Phi-3 (transformers' Phi3ForCausalLM): the Llama block with q, k and v stored as one matrix
// and gate and up as another (split at load), and a sliding window in every layer when the
// config sets one (GGUF files: none, as llama.cpp and transformers' GGUF loader run them).
// Partial rotary embeddings and the long-context "longrope" are refused.
#include "model/architecture.h"

#include "ditto/error.h"

namespace ditto {

const Architecture& phi3_architecture() {
  static const Architecture phi3{
      .name = "phi3",
      .gguf_name = "phi3",
      .gguf_qk_layout = QkLayout::Transformers,
      .read_config =
          [](const ConfigFields& config, ModelConfig& c) {
            if (config.number("partial_rotary_factor", 0.0, 1.0, 1.0) != 1.0)
              throw Error(config.source() + ": RoPE on part of each head (partial_rotary_factor) is not supported");
            read_sliding_window(config, c, 0);
          },
      .fused_projections = true,
  };
  return phi3;
}

}  // namespace ditto
