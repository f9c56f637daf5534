#include "model/config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ditto/error.h"
#include "model/architecture.h"

namespace ditto {

namespace {

using nlohmann::json;

size_t positive_size(const json& config, const char* key, const std::string& source) {
  if (!config.contains(key) || !config[key].is_number_integer() || config[key].get<int64_t>() <= 0)
    throw Error(source + ": '" + key + "' must be a positive integer");
  return config[key].get<size_t>();
}

void refuse_if_true(const json& config, const char* key, const std::string& what, const std::string& source) {
  if (config.contains(key) && config[key].is_boolean() && config[key].get<bool>())
    throw Error(source + ": " + what + " ('" + key + "': true) is not supported");
}

int64_t optional_token_id(const json& config, const char* key) {
  if (!config.contains(key)) return -1;
  const json& value = config[key];
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_array() && !value.empty() && value[0].is_number_integer()) return value[0].get<int64_t>();
  return -1;
}

// Since transformers 5 the rope settings live in "rope_parameters"; before, in
// "rope_theta" and "rope_scaling". Only plain RoPE is implemented: any other type, in
// either place, is refused rather than ignored.
double parse_rope_theta(const json& config, const std::string& source) {
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
  if (!(theta > 0.0)) throw Error(source + ": rope_theta must be positive");
  return theta;
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
  json config;
  try {
    config = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(std::string("config.json is not valid JSON: ") + e.what());
  }
  return model_config_from_json(config, "config.json");
}

ModelConfig model_config_from_json(const json& config, const std::string& source) {
  if (!config.is_object()) throw Error(source + " must hold a JSON object");
  try {
    ModelConfig c;
    c.architecture_name = config.value("model_type", std::string());
    const Architecture* architecture = find_architecture(c.architecture_name);
    if (architecture == nullptr)
      throw Error(source + ": architecture (model_type) '" + c.architecture_name + "' is not supported; ditto runs " +
                  architecture_names());
    c.vocab_size = positive_size(config, "vocab_size", source);
    c.hidden_size = positive_size(config, "hidden_size", source);
    c.intermediate_size = positive_size(config, "intermediate_size", source);
    c.layers = positive_size(config, "num_hidden_layers", source);
    c.heads = positive_size(config, "num_attention_heads", source);
    const auto given = [&](const char* key) { return config.contains(key) && !config[key].is_null(); };
    c.kv_heads = given("num_key_value_heads") ? positive_size(config, "num_key_value_heads", source) : c.heads;
    c.head_dim = given("head_dim") ? positive_size(config, "head_dim", source) : c.hidden_size / c.heads;
    c.max_positions = given("max_position_embeddings") ? positive_size(config, "max_position_embeddings", source) : 4096;
    check_attention_shape(c, source);
    c.rms_norm_eps = config.value("rms_norm_eps", 1e-6f);
    if (!(c.rms_norm_eps >= 0.0f) || std::isinf(c.rms_norm_eps))
      throw Error(source + ": rms_norm_eps must be a finite number, not negative");
    c.rope_theta = parse_rope_theta(config, source);
    c.tied_embeddings = config.value("tie_word_embeddings", false);
    c.bos_token_id = optional_token_id(config, "bos_token_id");
    c.eos_token_id = optional_token_id(config, "eos_token_id");
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
