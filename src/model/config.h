#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "ditto/model.h"

namespace ditto {

// Reads a Hugging Face config.json. Refuses, with a message naming it, anything the
// decoder does not implement (another architecture, rope scaling, biases, sliding window).
ModelConfig parse_hf_config(const std::string& json_text);
// The same from a JSON object in config.json's terms (GGUF metadata is translated into them);
// `source` starts every error message.
ModelConfig model_config_from_json(const nlohmann::json& config, const std::string& source);
// parse_hf_config of the config.json in checkpoint `directory`.
ModelConfig load_hf_config(const std::string& directory);

// Refuses head counts and sizes the decoder cannot run (GQA needs heads to be a multiple of
// kv_heads; RoPE needs an even head size); `source` starts the message.
void check_attention_shape(const ModelConfig& config, const std::string& source);

}  // namespace ditto
