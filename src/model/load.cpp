// One place that turns a model file into everything it brings: model, tokenizer, chat template
// and end tokens.
#include "ditto/load.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ditto/error.h"
#include "model/architecture.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/stages.h"
#include "model/weights.h"
#include "tensor/limits.h"

namespace ditto {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::shared_ptr<const Model> pack(const TensorStore& store, const ModelConfig& config, bool from_gguf,
                                  const LoadOptions& options) {
  const StoredLayout layout = from_gguf ? StoredLayout{find_architecture(config.architecture_name)->gguf_qk_layout, true}
                                        : StoredLayout{};
  const ModelPart part = options.stages > 1 || !options.split.empty()
                             ? stage_parts(store, config, options.stages, options.split).at(options.stage)
                             : ModelPart{};
  return std::make_shared<Model>(config, pack_hf_weights(store, config, layout, part, options.numerics));
}

// An id, a list of ids or null, as config.json and generation_config.json write eos_token_id;
// `field` names it in errors.
void add_stops(std::vector<int32_t>& stops, const json& value, const std::string& field) {
  if (value.is_null()) return;
  for (const json& id : value.is_array() ? value : json::array({value}))
    stops.push_back(int32_t(json_integer(id, field, limits::kTokenId)));
}

// A JSON file of a checkpoint directory, or null if it has none. Throws if it cannot be read.
json read_json(const fs::path& file) {
  if (!fs::exists(file)) return nullptr;
  std::ifstream in(file);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw Error("cannot read '" + file.string() + "'");
  return parse_json(text.str(), "'" + file.string() + "'");
}

void load_gguf(const std::string& path, const LoadOptions& options, LoadedModel& out) {
  auto file = std::make_shared<MappedFile>(path);
  const GgufFile gguf = parse_gguf(std::span(file->data(), file->size()), "'" + path + "'");
  out.config = gguf_model_config(gguf);
  if (options.weights) out.model = pack(gguf_tensor_store(file, gguf, out.config), out.config, /*from_gguf=*/true, options);
  if (options.tokenizer && options.tokenizer_file.empty() && gguf.has("tokenizer.ggml.model")) {
    try {
      out.tokenizer = Tokenizer::from_json(gguf_tokenizer_json(gguf));
    } catch (const Error& e) {
      throw Error("the tokenizer of " + path + ": " + e.what());
    }
  }
  if (gguf.has("tokenizer.chat_template")) out.chat_template = gguf.get_string("tokenizer.chat_template");
  if (out.tokenizer)
    for (const auto& [name, key] : {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"}, {"eos_token", "tokenizer.ggml.eos_token_id"},
                                    {"unk_token", "tokenizer.ggml.unknown_token_id"}, {"pad_token", "tokenizer.ggml.padding_token_id"}})
      if (gguf.has(key) && gguf.get_uint(key) < out.tokenizer->vocab_size()) {
        const int32_t id = int32_t(gguf.get_uint(key));
        out.special_tokens[name] = out.tokenizer->decode(std::span(&id, 1));
      }
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (gguf.has(key)) out.stop_tokens.push_back(int32_t(in_range(std::string("GGUF: ") + key, gguf.get_uint(key), limits::kTokenId)));
}

void load_checkpoint(const std::string& directory, const LoadOptions& options, LoadedModel& out) {
  const fs::path dir(directory);
  // Each file is read once (ditto verify's tests serve config.json through a pipe, once per run).
  const json config = read_json(dir / "config.json");
  if (config.is_null()) throw Error("'" + directory + "' has no readable config.json");
  out.config = model_config_from_json(config, "config.json");
  if (options.weights) out.model = pack(load_safetensors_checkpoint(directory), out.config, /*from_gguf=*/false, options);
  if (options.tokenizer && options.tokenizer_file.empty() && fs::exists(dir / "tokenizer.json"))
    out.tokenizer = Tokenizer::from_file((dir / "tokenizer.json").string());

  // transformers reads the template from chat_template.jinja if present, else from
  // tokenizer_config.json (a string, or a list of named templates of which "default" is used).
  const json tokenizer_config = read_json(dir / "tokenizer_config.json");
  if (fs::exists(dir / "chat_template.jinja")) {
    std::ifstream in(dir / "chat_template.jinja");
    std::ostringstream text;
    text << in.rdbuf();
    out.chat_template = text.str();
  } else if (tokenizer_config.is_object() && tokenizer_config.contains("chat_template")) {
    const json& chat_template = tokenizer_config["chat_template"];
    if (chat_template.is_string()) out.chat_template = chat_template.get<std::string>();
    if (chat_template.is_array())
      for (const json& named : chat_template)
        if (named.is_object() && named.value("name", "") == "default") out.chat_template = named.value("template", "");
  }

  if (config.is_object() && config.contains("eos_token_id"))
    add_stops(out.stop_tokens, config["eos_token_id"], "config.json: eos_token_id");
  const json generation = read_json(dir / "generation_config.json");
  if (generation.is_object() && generation.contains("eos_token_id"))
    add_stops(out.stop_tokens, generation["eos_token_id"], "generation_config.json: eos_token_id");
  // Special tokens as text: a string, or an added token's {"content": ...}.
  if (tokenizer_config.is_object())
    for (const char* name : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
      const json& token = tokenizer_config.contains(name) ? tokenizer_config[name] : json();
      const std::string text = token.is_string() ? token.get<std::string>()
                               : token.is_object() ? token.value("content", std::string()) : std::string();
      if (!text.empty()) out.special_tokens[name] = text;
    }
  if (out.tokenizer && out.special_tokens.count("eos_token"))
    if (const auto id = out.tokenizer->token_to_id(out.special_tokens["eos_token"])) out.stop_tokens.push_back(*id);
}

}  // namespace

LoadedModel load_model(const std::string& path, const LoadOptions& options) {
  LoadedModel out;
  const fs::path normal = fs::path(path).lexically_normal();
  out.name = normal.has_filename() ? normal.filename().string() : normal.parent_path().filename().string();
  if (fs::is_regular_file(path)) {
    load_gguf(path, options, out);
  } else if (fs::is_directory(path)) {
    load_checkpoint(path, options, out);
  } else {
    throw Error("'" + path + "' is not a checkpoint directory (config.json with safetensors weights) nor a GGUF file");
  }
  if (options.tokenizer && !options.tokenizer_file.empty()) out.tokenizer = Tokenizer::from_file(options.tokenizer_file);
  std::sort(out.stop_tokens.begin(), out.stop_tokens.end());
  out.stop_tokens.erase(std::unique(out.stop_tokens.begin(), out.stop_tokens.end()), out.stop_tokens.end());
  return out;
}

}  // namespace ditto
