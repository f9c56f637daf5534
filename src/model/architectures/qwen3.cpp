// Qwen3 (transformers' Qwen3ForCausalLM): the Llama block with an RMSNorm on every q and k
// head before RoPE; sliding windows as Qwen2 has them.
#include "model/architecture.h"

namespace ditto {

const Architecture& qwen3_architecture() {
  static const Architecture qwen3{"qwen3", "qwen3", QkLayout::Transformers, [](const ConfigFields& config, ModelConfig& c) {
                                    c.qk_norm = true;
                                    read_qwen_sliding_windows(config, c);
                                  }};
  return qwen3;
}

}  // namespace ditto
