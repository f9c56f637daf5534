#pragma once
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ditto/model.h"
#include "tensor/limits.h"

namespace ditto {

// Reads a Hugging Face config.json. Refuses, with a message naming it, anything the
// decoder does not implement (another architecture, rope scaling, biases, sliding window).
ModelConfig parse_hf_config(const std::string& json_text);
// config.json's key -> the name of the same field in the file read, for messages (GGUF metadata
// keys); a key not in it is named as config.json names it.
using FieldNames = std::map<std::string, std::string>;

// A config.json object (or GGUF metadata in its terms) read field by field, each value checked
// against its range; a message starts with the source and names the field as its file does.
class ConfigFields {
 public:
  ConfigFields(const nlohmann::json& config, std::string source, const FieldNames& names)
      : config_(config), source_(std::move(source)), names_(names) {}
  const nlohmann::json& json() const { return config_; }
  const std::string& source() const { return source_; }
  // "config.json: hidden_size", or "GGUF: hidden_size (llama.embedding_length)".
  std::string field(const std::string& key) const;
  bool given(const std::string& key) const { return config_.contains(key) && !config_[key].is_null(); }
  // A whole number in `range`; `fallback` when absent or null, else the absence is an error.
  size_t size(const std::string& key, Range range, std::optional<size_t> fallback = std::nullopt) const;
  // A number in [min, max], `fallback` when absent or null.
  double number(const std::string& key, double min, double max, double fallback) const;
  bool flag(const std::string& key, bool fallback) const;
  // Refuses `key` if it is true, as "`what` ('key': true) is not supported".
  void refuse_if_true(const std::string& key, const std::string& what) const;

 private:
  const nlohmann::json& config_;
  std::string source_;
  const FieldNames& names_;
};

// What several families share, for their read_config (src/model/architectures/).
// The sliding window of `sliding_window` in every layer: none when it is null, `absent` (the
// family's default) when the config leaves it out.
void read_sliding_window(const ConfigFields& config, ModelConfig& out, size_t absent);
// Qwen's windows: only with use_sliding_window, in the layers layer_types calls
// "sliding_attention" or, without layer_types, in layers max_window_layers (28) and up; the
// window sliding_window (4096).
void read_qwen_sliding_windows(const ConfigFields& config, ModelConfig& out);
// A mixture of experts in every layer: `experts_key` experts of `intermediate_key` each,
// num_experts_per_tok of them per row.
void read_experts(const ConfigFields& config, const std::string& experts_key, const std::string& intermediate_key,
                  ModelConfig& out);
// transformers' layer_types (one "sliding_attention" or "full_attention" per layer): true for
// each sliding layer.
std::vector<bool> read_layer_types(const ConfigFields& config, size_t layers);

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
