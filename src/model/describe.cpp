#include "model/describe.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "ditto/error.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/tensor_store.h"
#include "model/weights.h"
#include "tensor/checked.h"

namespace ditto {

namespace {

using Rows = std::vector<std::pair<std::string, std::string>>;

// The numerics the model runs with by default, and the other choice.
void add_numerics(Rows& rows, const TensorStore& store) {
  if (default_numerics(store) == Numerics::Exact) {
    rows.push_back({"numerics", "exact (no quantised weights)"});
    return;
  }
  const Numerics other = kQuantizedDefault == Numerics::Int8 ? Numerics::Exact : Numerics::Int8;
  rows.push_back({"numerics", numerics_name(kQuantizedDefault) + " by default for quantised weights; --numerics " +
                                  numerics_name(other) + " for the other (docs/numerics-quant.md)"});
}

void add_config(Rows& rows, const ModelConfig& c) {
  rows.push_back({"architecture", c.architecture_name});
  rows.push_back({"layers", std::to_string(c.layers)});
  rows.push_back({"hidden size", std::to_string(c.hidden_size)});
  rows.push_back({"MLP size", std::to_string(c.intermediate_size)});
  rows.push_back({"attention heads", std::to_string(c.heads) + " (key/value heads " + std::to_string(c.kv_heads) +
                                         ", head size " + std::to_string(c.head_dim) + ")"});
  rows.push_back({"vocabulary", std::to_string(c.vocab_size)});
  rows.push_back({"context length", std::to_string(c.max_positions)});
  std::ostringstream rope;
  rope << "theta " << c.rope_theta;
  if (const ModelConfig::Llama3Rope& r = c.llama3_rope; r.factor != 0.0)
    rope << ", llama3 scaling (factor " << r.factor << ", frequency factors " << r.low_freq_factor << " and "
         << r.high_freq_factor << ", original context " << r.original_max_positions << ")";
  rope << ", RMSNorm eps " << c.rms_norm_eps;
  rows.push_back({"rope", rope.str()});
  rows.push_back({"embeddings", c.tied_embeddings ? "tied to the output" : "separate output matrix"});
  size_t windowed = 0, widest = 0;
  for (size_t l = 0; l < c.layers; ++l) windowed += c.window(l) != 0, widest = std::max(widest, c.window(l));
  if (windowed != 0) {
    std::ostringstream text;
    text << widest << " positions in " << windowed << " of " << c.layers << " layers";
    if (c.rope_local_theta != 0.0) text << ", rope theta " << c.rope_local_theta << " there";
    rows.push_back({"sliding window", text.str()});
  }
  if (c.experts != 0) {
    size_t sparse = 0;
    for (size_t l = 0; l < c.layers; ++l) sparse += c.sparse(l);
    rows.push_back({"experts", "top " + std::to_string(c.experts_per_token) + " of " + std::to_string(c.experts) +
                                   (c.normalize_top_k ? " (weights renormalised)" : "") + ", MLP size " +
                                   std::to_string(c.expert_intermediate_size) + ", in " + std::to_string(sparse) +
                                   " of " + std::to_string(c.layers) + " layers"});
  }
}

// "q4_1 210, f32 61, q8_0 1" and the parameter count, from the tensors' types and shapes.
template <typename Tensors, typename TypeOf, typename ShapeOf>
void add_tensors(Rows& rows, const Tensors& tensors, TypeOf type_of, ShapeOf shape_of) {
  std::map<std::string, size_t> counts;
  size_t parameters = 0;
  for (const auto& tensor : tensors) {
    ++counts[type_of(tensor)];
    size_t elements = 1;
    for (size_t d : shape_of(tensor)) elements = checked_mul(elements, d, "a tensor's size");
    parameters = checked_add(parameters, elements, "the parameter count");
  }
  std::string types;
  for (const auto& [type, count] : counts) types += (types.empty() ? "" : ", ") + type + " x" + std::to_string(count);
  rows.push_back({"parameters", std::to_string(parameters)});
  rows.push_back({"tensors", std::to_string(tensors.size()) + ": " + types});
}

Rows describe_gguf(const std::string& path) {
  const auto file = std::make_shared<MappedFile>(path);
  const GgufFile gguf = parse_gguf(std::span(file->data(), file->size()), "'" + path + "'");
  Rows rows = {{"format", "GGUF version " + std::to_string(gguf.version) + ", " + std::to_string(file->size()) + " bytes"}};
  if (gguf.has("general.name")) rows.push_back({"name", gguf.get_string("general.name")});
  const ModelConfig config = gguf_model_config(gguf);
  // The sizes shown are the ones the model would run with: every tensor checked against them.
  const TensorStore store = gguf_tensor_store(file, gguf, config);
  check_hf_weights(store, config);
  add_config(rows, config);
  add_numerics(rows, store);
  add_tensors(
      rows, gguf.tensors, [](const GgufTensorInfo& t) { return dtype_name(t.dtype); },
      [](const GgufTensorInfo& t) { return t.shape; });
  std::string tokenizer = "none in the file";
  if (gguf.has("tokenizer.ggml.model")) {
    tokenizer = gguf.get_string("tokenizer.ggml.model");
    if (tokenizer == "gpt2") tokenizer = "byte-level BPE (gpt2)";
    if (gguf.has("tokenizer.ggml.pre")) tokenizer += ", pre-tokenizer '" + gguf.get_string("tokenizer.ggml.pre") + "'";
    if (gguf.has("tokenizer.ggml.tokens"))
      tokenizer += ", " + std::to_string(gguf.get_string_array("tokenizer.ggml.tokens").size()) + " tokens";
    if (gguf.has("tokenizer.ggml.merges"))
      tokenizer += ", " + std::to_string(gguf.get_string_array("tokenizer.ggml.merges").size()) + " merges";
  }
  rows.push_back({"tokenizer", tokenizer});
  rows.push_back({"chat template", gguf.has("tokenizer.chat_template") ? "yes" : "no"});
  return rows;
}

Rows describe_checkpoint(const std::string& directory) {
  namespace fs = std::filesystem;
  Rows rows = {{"format", "Hugging Face checkpoint (config.json, safetensors)"}};
  const ModelConfig config = load_hf_config(directory);
  const TensorStore store = load_safetensors_checkpoint(directory);
  check_hf_weights(store, config);
  add_config(rows, config);
  add_numerics(rows, store);
  add_tensors(
      rows, store.tensors(), [](const auto& entry) { return dtype_name(entry.second.dtype); },
      [](const auto& entry) { return entry.second.shape; });
  rows.push_back({"tokenizer", fs::exists(fs::path(directory) / "tokenizer.json") ? "tokenizer.json" : "none found"});
  return rows;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> describe_model(const std::string& path) {
  if (std::filesystem::is_directory(path)) return describe_checkpoint(path);
  return describe_gguf(path);
}

}  // namespace ditto
