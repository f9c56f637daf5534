// Qwen2 (transformers' Qwen2ForCausalLM), also Qwen2.5: the Llama block with biases on the q, k
// and v projections. With use_sliding_window, the layers from max_window_layers on (or those
// layer_types names) attend over a sliding window.
#include "model/architecture.h"

namespace ditto {

const Architecture& qwen2_architecture() {
  static const Architecture qwen2{"qwen2", "qwen2", QkLayout::Transformers, [](const ConfigFields& config, ModelConfig& c) {
                                    c.qkv_bias = true;
                                    read_qwen_sliding_windows(config, c);
                                  }};
  return qwen2;
}

}  // namespace ditto
