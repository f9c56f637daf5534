#include "model/config.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ditto/error.h"
#include "model/architecture.h"
#include "tensor/limits.h"

namespace ditto {

namespace {

using nlohmann::json;

// A token id, or the first of a list of them (each checked); -1 when absent, null or empty.
int64_t optional_token_id(const json& config, const char* key, const std::string& field) {
  if (!config.contains(key) || config[key].is_null()) return -1;
  int64_t first = -1;
  for (const json& id : config[key].is_array() ? config[key] : json::array({config[key]})) {
    const int64_t checked = json_integer(id, field, limits::kTokenId);
    if (first < 0) first = checked;
  }
  return first;
}

// Llama 3.1's scaling, its four fields checked: the wavelengths divide by the two frequency
// factors, and the band between them by their difference.
ModelConfig::Llama3Rope parse_llama3_rope(const ConfigFields& rope) {
  ModelConfig::Llama3Rope scaling;
  const auto required = [&](const char* key, double min, double max) {
    if (!rope.given(key)) throw Error(rope.field(key) + " is missing: llama3 rope scaling needs it");
    return rope.number(key, min, max, 0.0);
  };
  scaling.factor = required("factor", 1.0, limits::kMaxRopeFactor);
  scaling.low_freq_factor = required("low_freq_factor", limits::kMinRopeFactor, limits::kMaxRopeFactor);
  scaling.high_freq_factor = required("high_freq_factor", limits::kMinRopeFactor, limits::kMaxRopeFactor);
  if (!(scaling.high_freq_factor > scaling.low_freq_factor))
    throw Error(rope.field("high_freq_factor") + " must be greater than low_freq_factor");
  if (!rope.given("original_max_position_embeddings"))
    throw Error(rope.field("original_max_position_embeddings") + " is missing: llama3 rope scaling needs it");
  scaling.original_max_positions = double(rope.size("original_max_position_embeddings", limits::kPositions));
  return scaling;
}

// Since transformers 5 the rope settings live in "rope_parameters"; before, in
// "rope_theta" and "rope_scaling". Plain RoPE and Llama 3.1's scaling are implemented: any
// other type, in either place, is refused rather than ignored.
void parse_rope(const ConfigFields& fields, ModelConfig& c) {
  const json& config = fields.json();
  double theta = config.value("rope_theta", 10000.0);
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!fields.given(key)) continue;
    const json& rope = config[key];
    if (!rope.is_object()) throw Error(fields.source() + ": '" + key + "' must be an object");
    const std::string type = rope.value("rope_type", rope.value("type", std::string("default")));
    if (type == "llama3") {
      c.llama3_rope = parse_llama3_rope(ConfigFields(rope, fields.source() + ": " + key, {}));
    } else if (type != "default") {
      throw Error(fields.source() + ": rope scaling of type '" + type + "' is not supported (only plain RoPE and llama3)");
    }
    theta = rope.value("rope_theta", theta);
  }
  c.rope_theta = in_range(fields.field("rope_theta"), theta, limits::kMinRopeTheta, limits::kMaxRopeTheta);
}

}  // namespace

std::string ConfigFields::field(const std::string& key) const {
  const auto found = names_.find(key);
  return source_ + ": " + key + (found == names_.end() ? "" : " (" + found->second + ")");
}

size_t ConfigFields::size(const std::string& key, Range range, std::optional<size_t> fallback) const {
  if (!given(key)) {
    if (fallback) return *fallback;
    throw Error(field(key) + " is missing: a whole number in " + std::to_string(range.min) + ".." +
                std::to_string(range.max) + " is needed");
  }
  return size_t(json_integer(config_[key], field(key), range));
}

double ConfigFields::number(const std::string& key, double min, double max, double fallback) const {
  return given(key) ? json_number(config_[key], field(key), min, max) : fallback;
}

bool ConfigFields::flag(const std::string& key, bool fallback) const {
  if (!given(key)) return fallback;
  if (!config_[key].is_boolean()) throw Error(field(key) + " is " + detail::json_text(config_[key]) + ", not true or false");
  return config_[key].get<bool>();
}

void ConfigFields::refuse_if_true(const std::string& key, const std::string& what) const {
  if (flag(key, false)) throw Error(source_ + ": " + what + " ('" + key + "': true) is not supported");
}

std::vector<bool> read_layer_types(const ConfigFields& config, size_t layers) {
  const json& types = config.json()["layer_types"];
  if (!types.is_array() || types.size() != layers)
    throw Error(config.field("layer_types") + " must list one type for each of the " + std::to_string(layers) + " layers");
  std::vector<bool> sliding(layers);
  for (size_t l = 0; l < layers; ++l) {
    const std::string type = types[l].is_string() ? types[l].get<std::string>() : detail::json_text(types[l]);
    if (type != "sliding_attention" && type != "full_attention")
      throw Error(config.field("layer_types") + ": layer " + std::to_string(l) + " is '" + type +
                  "', not 'sliding_attention' or 'full_attention'");
    sliding[l] = type == "sliding_attention";
  }
  return sliding;
}

namespace {

// sliding_window: `absent` when the config leaves it out (the family's default), 0 (none) when null.
size_t sliding_window(const ConfigFields& config, size_t absent) {
  if (!config.json().contains("sliding_window")) return absent;
  return config.size("sliding_window", limits::kPositions, size_t(0));
}

}  // namespace

void read_sliding_window(const ConfigFields& config, ModelConfig& out, size_t absent) {
  out.sliding_windows.assign(out.layers, sliding_window(config, absent));
}

void read_qwen_sliding_windows(const ConfigFields& config, ModelConfig& out) {
  if (!config.flag("use_sliding_window", false)) return;
  const size_t window = sliding_window(config, 4096);
  out.sliding_windows.assign(out.layers, 0);
  if (config.given("layer_types")) {
    const std::vector<bool> sliding = read_layer_types(config, out.layers);
    for (size_t l = 0; l < out.layers; ++l)
      if (sliding[l]) out.sliding_windows[l] = window;
  } else {
    const size_t first = config.size("max_window_layers", {0, limits::kLayers.max}, size_t(28));
    for (size_t l = first; l < out.layers; ++l) out.sliding_windows[l] = window;
  }
}

void read_experts(const ConfigFields& config, const std::string& experts_key, const std::string& intermediate_key,
                  ModelConfig& out) {
  out.experts = config.size(experts_key, limits::kExperts);
  out.experts_per_token = config.size("num_experts_per_tok", limits::kExperts);
  if (out.experts_per_token > out.experts)
    throw Error(config.field("num_experts_per_tok") + " is " + std::to_string(out.experts_per_token) +
                ", more than the " + std::to_string(out.experts) + " experts (" + experts_key + ")");
  out.expert_intermediate_size = config.size(intermediate_key, limits::kWidth);
  out.sparse_layers.assign(out.layers, true);
}

void check_attention_shape(const ModelConfig& c, const std::string& source) {
  if (c.heads % c.kv_heads != 0)
    throw Error(source + ": num_attention_heads (GGUF: attention.head_count) must be a multiple of "
                         "num_key_value_heads (attention.head_count_kv)");
  if (c.head_dim == 0 || c.head_dim % 2 != 0) throw Error(source + ": the head size must be even and positive for RoPE");
}

ModelConfig load_hf_config(const std::string& directory) {
  std::ifstream in(std::filesystem::path(directory) / "config.json");
  if (!in) throw Error("'" + directory + "' has no readable config.json");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_hf_config(text.str());
}

ModelConfig parse_hf_config(const std::string& json_text) {
  return model_config_from_json(parse_json(json_text, "config.json"), "config.json");
}

ModelConfig model_config_from_json(const json& config, const std::string& source, const FieldNames& names) {
  if (!config.is_object()) throw Error(source + " must hold a JSON object");
  try {
    const ConfigFields fields(config, source, names);
    ModelConfig c;
    c.architecture_name = config.value("model_type", std::string());
    const Architecture* architecture = find_architecture(c.architecture_name);
    if (architecture == nullptr)
      throw Error(source + ": architecture (model_type) '" + c.architecture_name + "' is not supported; ditto runs " +
                  architecture_names());
    c.vocab_size = fields.size("vocab_size", limits::kVocabSize);
    c.hidden_size = fields.size("hidden_size", limits::kWidth);
    c.intermediate_size = fields.size("intermediate_size", limits::kWidth);
    c.layers = fields.size("num_hidden_layers", limits::kLayers);
    c.heads = fields.size("num_attention_heads", limits::kHeads);
    c.kv_heads = fields.size("num_key_value_heads", limits::kHeads, c.heads);
    c.head_dim = fields.size("head_dim", limits::kHeadDim, c.hidden_size / c.heads);
    in_range(fields.field("head_dim"), uint64_t(c.head_dim), limits::kHeadDim);  // also when derived
    c.max_positions = fields.size("max_position_embeddings", limits::kPositions, size_t(4096));
    check_attention_shape(c, source);
    // Read as a double and checked before it narrows: a float cannot hold 1e300.
    c.rms_norm_eps = float(fields.number("rms_norm_eps", 0.0, limits::kMaxRmsNormEps, 1e-6));
    parse_rope(fields, c);
    c.tied_embeddings = config.value("tie_word_embeddings", false);
    c.bos_token_id = optional_token_id(config, "bos_token_id", fields.field("bos_token_id"));
    c.eos_token_id = optional_token_id(config, "eos_token_id", fields.field("eos_token_id"));
    const std::string activation = config.value("hidden_act", std::string("silu"));
    if (activation != "silu") throw Error(source + ": hidden_act '" + activation + "' is not supported (only silu)");
    fields.refuse_if_true("attention_bias", "a bias on the attention projections");
    fields.refuse_if_true("mlp_bias", "a bias on the MLP projections");
    architecture->read_config(fields, c);
    return c;
  } catch (const json::exception& e) {
    throw Error(source + ": a field has the wrong type: " + e.what());
  }
}

}  // namespace ditto
