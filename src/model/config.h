#pragma once
#include <string>

#include "ditto/model.h"

namespace ditto {

// Reads a Hugging Face config.json. Refuses, with a message naming it, anything the
// decoder does not implement (another architecture, rope scaling, biases, sliding window).
ModelConfig parse_hf_config(const std::string& json_text);
// parse_hf_config of the config.json in checkpoint `directory`.
ModelConfig load_hf_config(const std::string& directory);

// Sets the architecture and what follows from it (Qwen3's q/k norm) from its name, as both
// config.json's model_type and GGUF's general.architecture spell it. False if unknown.
bool set_architecture(ModelConfig& config, const std::string& name);

// Refuses head counts and sizes the decoder cannot run (GQA needs heads to be a multiple of
// kv_heads; RoPE needs an even head size); `source` starts the message.
void check_attention_shape(const ModelConfig& config, const std::string& source);

}  // namespace ditto
