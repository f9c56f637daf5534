#pragma once
#include <string>

#include "ditto/model.h"

namespace ditto {

// Reads a Hugging Face config.json. Refuses, with a message naming it, anything the
// decoder does not implement (another architecture, rope scaling, biases, sliding window).
ModelConfig parse_hf_config(const std::string& json_text);

// Refuses head counts and sizes the decoder cannot run (GQA needs heads to be a multiple of
// kv_heads; RoPE needs an even head size); `source` starts the message.
void check_attention_shape(const ModelConfig& config, const std::string& source);

}  // namespace ditto
