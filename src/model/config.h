#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "ditto/model.h"

namespace ditto {

// Reads a Hugging Face config.json. Refuses, with a message naming it, anything the
// decoder does not implement (another architecture, rope scaling, biases, sliding window).
ModelConfig parse_hf_config(const std::string& json_text);
// config.json's key -> the name of the same field in the file read, for messages (GGUF metadata
// keys); a key not in it is named as config.json names it.
using FieldNames = std::map<std::string, std::string>;

// The same from a JSON object in config.json's terms (GGUF metadata is translated into them);
// `source` starts every error message. Every number is checked against its range
// (src/tensor/limits.h, docs/limits.md); a message names the field, its value and the range.
ModelConfig model_config_from_json(const nlohmann::json& config, const std::string& source,
                                   const FieldNames& names = {});
// parse_hf_config of the config.json in checkpoint `directory`.
ModelConfig load_hf_config(const std::string& directory);

// Refuses head counts and sizes the decoder cannot run (GQA needs heads to be a multiple of
// kv_heads; RoPE needs an even head size); `source` starts the message.
void check_attention_shape(const ModelConfig& config, const std::string& source);

}  // namespace ditto
