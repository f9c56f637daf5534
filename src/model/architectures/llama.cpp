// Llama (transformers' LlamaForCausalLM), also SmolLM2 and Llama 3.1 (its llama3 RoPE scaling is
// read with the other RoPE fields): pre-norm blocks of GQA attention with rotate-half RoPE and a
// SwiGLU MLP; the block every other family starts from. llama.cpp's converter interleaves the
// halves of each q and k head in GGUF files.
#include "model/architecture.h"

namespace ditto {

const Architecture& llama_architecture() {
  static const Architecture llama{"llama", "llama", QkLayout::InterleavedRope, [](const ConfigFields&, ModelConfig&) {}};
  return llama;
}

}  // namespace ditto
