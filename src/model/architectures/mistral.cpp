// Mistral (transformers' MistralForCausalLM): the Llama block, every layer attending over a
// sliding window of `sliding_window` positions when the config sets one (Mistral 7B v0.1: 4096;
// later versions: none). llama.cpp writes Mistral's GGUF files as `llama`, without the window,
// which is how they load (as llama.cpp and transformers' GGUF loader run them).
#include "model/architecture.h"

namespace ditto {

const Architecture& mistral_architecture() {
  static const Architecture mistral{"mistral", "llama", QkLayout::InterleavedRope, [](const ConfigFields& config, ModelConfig& c) {
                                      read_sliding_window(config, c, 4096);  // MistralConfig's default
                                    }};
  return mistral;
}

}  // namespace ditto
