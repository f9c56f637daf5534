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

// The name of a field in messages: config.json's key, and the file's own where it differs (GGUF).
std::string field_name(const FieldNames& names, const std::string& source, const std::string& key) {
  const auto found = names.find(key);
  return source + ": " + key + (found == names.end() ? "" : " (" + found->second + ")");
}

void refuse_if_true(const json& config, const char* key, const std::string& what, const std::string& source) {
  if (config.contains(key) && config[key].is_boolean() && config[key].get<bool>())
    throw Error(source + ": " + what + " ('" + key + "': true) is not supported");
}

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

// Since transformers 5 the rope settings live in "rope_parameters"; before, in
// "rope_theta" and "rope_scaling". Only plain RoPE is implemented: any other type, in
// either place, is refused rather than ignored.
double parse_rope_theta(const json& config, const std::string& source, const std::string& field) {
  double theta = config.value("rope_theta", 10000.0);
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!config.contains(key) || config[key].is_null()) continue;
    const json& rope = config[key];
    if (!rope.is_object()) throw Error(source + ": '" + key + "' must be an object");
    const std::string type = rope.value("rope_type", rope.value("type", std::string("default")));
    if (type != "default")
      throw Error(source + ": rope scaling of type '" + type + "' is not supported (only plain RoPE)");
    theta = rope.value("rope_theta", theta);
  }
  return in_range(field, theta, limits::kMinRopeTheta, limits::kMaxRopeTheta);
}

}  // namespace

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
    ModelConfig c;
    c.architecture_name = config.value("model_type", std::string());
    const Architecture* architecture = find_architecture(c.architecture_name);
    if (architecture == nullptr)
      throw Error(source + ": architecture (model_type) '" + c.architecture_name + "' is not supported; ditto runs " +
                  architecture_names());
    const auto given = [&](const char* key) { return config.contains(key) && !config[key].is_null(); };
    // A size in its range (src/tensor/limits.h); `fallback` when the config may leave it out.
    const auto size = [&](const char* key, Range range, std::optional<size_t> fallback = std::nullopt) -> size_t {
      const std::string field = field_name(names, source, key);
      if (!given(key)) {
        if (fallback) return *fallback;
        throw Error(field + " is missing: a whole number in " + std::to_string(range.min) + ".." +
                    std::to_string(range.max) + " is needed");
      }
      return size_t(json_integer(config[key], field, range));
    };
    c.vocab_size = size("vocab_size", limits::kVocabSize);
    c.hidden_size = size("hidden_size", limits::kWidth);
    c.intermediate_size = size("intermediate_size", limits::kWidth);
    c.layers = size("num_hidden_layers", limits::kLayers);
    c.heads = size("num_attention_heads", limits::kHeads);
    c.kv_heads = size("num_key_value_heads", limits::kHeads, c.heads);
    c.head_dim = size("head_dim", limits::kHeadDim, c.hidden_size / c.heads);
    in_range(field_name(names, source, "head_dim"), uint64_t(c.head_dim), limits::kHeadDim);  // also when derived
    c.max_positions = size("max_position_embeddings", limits::kPositions, size_t(4096));
    check_attention_shape(c, source);
    // Read as a double and checked before it narrows: a float cannot hold 1e300.
    c.rms_norm_eps = float(given("rms_norm_eps") ? json_number(config["rms_norm_eps"], field_name(names, source, "rms_norm_eps"),
                                                               0.0, limits::kMaxRmsNormEps)
                                                 : 1e-6);
    c.rope_theta = parse_rope_theta(config, source, field_name(names, source, "rope_theta"));
    c.tied_embeddings = config.value("tie_word_embeddings", false);
    c.bos_token_id = optional_token_id(config, "bos_token_id", field_name(names, source, "bos_token_id"));
    c.eos_token_id = optional_token_id(config, "eos_token_id", field_name(names, source, "eos_token_id"));
    const std::string activation = config.value("hidden_act", std::string("silu"));
    if (activation != "silu") throw Error(source + ": hidden_act '" + activation + "' is not supported (only silu)");
    refuse_if_true(config, "attention_bias", "a bias on the attention projections", source);
    refuse_if_true(config, "mlp_bias", "a bias on the MLP projections", source);
    refuse_if_true(config, "use_sliding_window", "sliding-window attention", source);
    architecture->read_config(config, c);
    return c;
  } catch (const json::exception& e) {
    throw Error(source + ": a field has the wrong type: " + e.what());
  }
}

}  // namespace ditto
