// GGUF files of the families in the registry (model/architecture.h): metadata to ModelConfig,
// through config.json's terms, and llama.cpp's tensor names to transformers' names.
#include <algorithm>

#include "ditto/error.h"
#include "model/architecture.h"
#include "model/config.h"
#include "model/gguf.h"

namespace ditto {

namespace {

const GgufTensorInfo* find_tensor(const GgufFile& gguf, const std::string& name) {
  for (const GgufTensorInfo& tensor : gguf.tensors)
    if (tensor.name == name) return &tensor;
  return nullptr;
}

using NamePair = std::pair<const char*, const char*>;  // {llama.cpp's name, transformers'}

constexpr NamePair kOuterTensors[] = {
    {"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"}};
// The parts of block N ("blk.N." and "model.layers.N.") in Llama's files.
constexpr NamePair kBlockParts[] = {
    {"attn_norm.weight", "input_layernorm.weight"},  {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"}, {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},     {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

// A name of one convention in the other: with `to_hf`, llama.cpp's `name` as transformers
// names it, else the reverse; "" for a name of neither. The family's own block parts come first.
std::string translate_tensor_name(const std::string& name, const Architecture& family, bool to_hf) {
  const auto from = [&](const NamePair& pair) { return to_hf ? pair.first : pair.second; };
  const auto to = [&](const NamePair& pair) { return std::string(to_hf ? pair.second : pair.first); };
  for (const NamePair& pair : kOuterTensors)
    if (name == from(pair)) return to(pair);
  const std::string block = to_hf ? "blk." : "model.layers.";
  if (name.compare(0, block.size(), block) != 0) return "";
  const size_t dot = name.find('.', block.size());
  const std::string layer = name.substr(block.size(), dot == std::string::npos ? 0 : dot - block.size());
  if (layer.empty() || layer.size() > 6 || !std::all_of(layer.begin(), layer.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return "";
  const std::string part = name.substr(dot + 1), prefix = to_hf ? "model.layers." : "blk.";
  for (const std::span<const NamePair> parts : {family.gguf_block_tensors, std::span<const NamePair>(kBlockParts)})
    for (const NamePair& pair : parts)
      if (part == from(pair)) return prefix + std::to_string(std::stoul(layer)) + "." + to(pair);
  return "";
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& gguf) {
  const std::string name = gguf.get_string("general.architecture");
  const Architecture* architecture = find_gguf_architecture(name);
  if (architecture == nullptr)
    throw Error("GGUF architecture '" + name + "' is not supported; ditto runs " + architecture_names());
  const std::string arch = name + ".";
  // The metadata in config.json's terms, so that one reader checks both kinds of file; the
  // messages name the GGUF keys.
  nlohmann::json config = {{"model_type", std::string(architecture->name)}};
  FieldNames names;
  const auto read = [&](const GgufKey& key) {
    names[key.hf] = arch + key.gguf;
    if (key.required || gguf.has(arch + key.gguf)) config[key.hf] = gguf.get_uint(arch + key.gguf);
  };
  for (const GgufKey& key : {GgufKey{"block_count", "num_hidden_layers", true},
                             GgufKey{"embedding_length", "hidden_size", true},
                             GgufKey{"feed_forward_length", "intermediate_size", true},
                             GgufKey{"attention.head_count", "num_attention_heads", true},
                             GgufKey{"attention.head_count_kv", "num_key_value_heads", false},
                             GgufKey{"attention.key_length", "head_dim", false},
                             GgufKey{"context_length", "max_position_embeddings", true}})
    read(key);
  names["rms_norm_eps"] = arch + "attention.layer_norm_rms_epsilon";
  config["rms_norm_eps"] = gguf.get_float(arch + "attention.layer_norm_rms_epsilon");
  names["rope_theta"] = arch + "rope.freq_base";
  if (gguf.has(arch + "rope.freq_base")) config["rope_theta"] = gguf.get_float(arch + "rope.freq_base");
  if (gguf.has(arch + "rope.scaling.type") && gguf.get_string(arch + "rope.scaling.type") != "none")
    throw Error("GGUF: rope scaling of type '" + gguf.get_string(arch + "rope.scaling.type") +
                "' is not supported (only plain RoPE)");
  if (gguf.has(arch + "expert_count") && gguf.get_uint(arch + "expert_count") != 0)
    throw Error("GGUF: mixture-of-experts models are not supported");

  const GgufTensorInfo* embedding = find_tensor(gguf, "token_embd.weight");
  if (embedding == nullptr || embedding->shape.size() != 2) throw Error("GGUF: no 2-D tensor 'token_embd.weight'");
  names["vocab_size"] = "the rows of token_embd.weight";
  config["vocab_size"] = embedding->shape[0];
  config["tie_word_embeddings"] = find_tensor(gguf, "output.weight") == nullptr;
  for (const char* id : {"bos_token_id", "eos_token_id"}) {
    names[id] = std::string("tokenizer.ggml.") + id;
    if (gguf.has(names[id])) config[id] = gguf.get_uint(names[id]);
  }
  for (const GgufKey& key : architecture->gguf_keys) read(key);
  if (architecture->gguf_conventions) architecture->gguf_conventions(config);
  const ModelConfig c = model_config_from_json(config, "GGUF", names);
  if (gguf.has(arch + "attention.value_length") && gguf.get_uint(arch + "attention.value_length") != c.head_dim)
    throw Error("GGUF: value heads of another size than key heads are not supported");
  if (gguf.has(arch + "rope.dimension_count") && gguf.get_uint(arch + "rope.dimension_count") != c.head_dim)
    throw Error("GGUF: RoPE on part of each head (rope.dimension_count != head size) is not supported");
  return c;
}

TensorStore gguf_tensor_store(std::shared_ptr<MappedFile> file, const GgufFile& gguf) {
  const Architecture* family = find_gguf_architecture(gguf.get_string("general.architecture"));
  if (family == nullptr)
    throw Error(file->path() + ": GGUF architecture '" + gguf.get_string("general.architecture") + "' is not supported");
  TensorStore store;
  store.set_file_naming([family](const std::string& name) { return translate_tensor_name(name, *family, false); });
  for (const GgufTensorInfo& tensor : gguf.tensors) {
    const std::string name = translate_tensor_name(tensor.name, *family, true);
    if (name.empty())
      throw Error(file->path() + ": tensor '" + tensor.name + "' is not part of a " + std::string(family->name) +
                  " decoder as ditto runs it");
    TensorView view;
    view.dtype = tensor.dtype;
    view.shape = tensor.shape;
    view.data = file->data() + gguf.data_offset + tensor.offset;
    view.bytes = tensor.bytes;
    store.add(name, std::move(view), "'" + file->path() + "'");
  }
  store.add_file(std::move(file));
  return store;
}

}  // namespace ditto
