// GGUF files of the families in the registry (model/architecture.h): metadata to ModelConfig,
// through config.json's terms, and llama.cpp's tensor names to transformers' names.
#include <algorithm>
#include <array>
#include <span>

#include "ditto/error.h"
#include "model/architecture.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/weights.h"

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
// The parts of block N ("blk.N." and "model.layers.N.") in Llama's files, and Qwen2's and Phi-3's.
constexpr NamePair kBlockParts[] = {
    {"attn_norm.weight", "input_layernorm.weight"},  {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},        {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},        {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"}, {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},     {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

// The block parts of a family's files, its own names first.
std::array<std::span<const NamePair>, 2> block_parts(const Architecture& family) {
  return {family.gguf_block_tensors, std::span<const NamePair>(kBlockParts)};
}

// The layer of a tensor name `block` + "N.part" and its part, or false for another name.
bool split_block_name(const std::string& name, size_t& layer, std::string& part, const std::string& block = "blk.") {
  if (name.compare(0, block.size(), block) != 0) return false;
  const size_t dot = name.find('.', block.size());
  const std::string digits = name.substr(block.size(), dot == std::string::npos ? 0 : dot - block.size());
  if (digits.empty() || digits.size() > 6 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  layer = std::stoul(digits);
  part = name.substr(dot + 1);
  return true;
}

// transformers' name for a GGUF tensor of a `family` decoder, or "" for another tensor.
// Stacked experts (ffn_*_exps) are named by expert_tensor_names instead.
std::string hf_tensor_name(const std::string& name, const Architecture& family) {
  for (const auto& [gguf_name, hf_name] : kOuterTensors)
    if (name == gguf_name) return hf_name;
  if (name == "rope_freqs.weight") return name;  // Llama 3.1's RoPE scaling, as llama.cpp stores it
  size_t layer;
  std::string part;
  if (!split_block_name(name, layer, part)) return "";
  const std::string prefix = "model.layers." + std::to_string(layer) + ".";
  if (family.experts && part == "ffn_gate_inp.weight") return prefix + std::string(family.experts->router);
  // Phi-3's fused matrices: attn_qkv, and ffn_up holding gate and up.
  if (family.fused_projections && part == "ffn_up.weight") return prefix + "mlp.gate_up_proj.weight";
  for (const std::span<const NamePair> parts : block_parts(family))
    for (const auto& [gguf_part, hf_part] : parts)
      if (part == gguf_part) return prefix + hf_part;
  return "";
}

// The other way, for messages: how a `family` file names the tensor transformers names `name`,
// or "" (experts, fused matrices).
std::string gguf_tensor_name(const std::string& name, const Architecture& family) {
  for (const auto& [gguf_name, hf_name] : kOuterTensors)
    if (name == hf_name) return gguf_name;
  size_t layer;
  std::string part;
  if (!split_block_name(name, layer, part, "model.layers.")) return "";
  for (const std::span<const NamePair> parts : block_parts(family))
    for (const auto& [gguf_part, hf_part] : parts)
      if (part == hf_part) return "blk." + std::to_string(layer) + "." + gguf_part;
  return "";
}

// For a stacked-experts tensor blk.N.ffn_{gate,up,down}_exps.weight: the prefix of its experts'
// transformers names (expert e: prefix + e + "." + suffix) and the suffix; false for another name.
bool expert_tensor_names(const std::string& name, const Architecture& family, std::string& prefix, std::string& suffix) {
  size_t layer;
  std::string part;
  if (!family.experts || !split_block_name(name, layer, part)) return false;
  const ExpertNames& names = *family.experts;
  const std::pair<const char*, std::string_view> parts[] = {
      {"ffn_gate_exps.weight", names.gate}, {"ffn_up_exps.weight", names.up}, {"ffn_down_exps.weight", names.down}};
  for (const auto& [gguf_part, hf_suffix] : parts)
    if (part == gguf_part) {
      prefix = "model.layers." + std::to_string(layer) + "." + std::string(names.expert);
      suffix = std::string(hf_suffix);
      return true;
    }
  return false;
}

const Architecture& gguf_architecture(const GgufFile& gguf) {
  const std::string name = gguf.get_string("general.architecture");
  const std::string experts_key = name + ".expert_count";
  const bool experts = gguf.has(experts_key) && gguf.get_uint(experts_key) != 0;
  if (const Architecture* found = find_gguf_architecture(name, experts)) return *found;
  if (find_gguf_architecture(name, !experts))
    throw Error(experts ? "GGUF: " + experts_key + " is " + std::to_string(gguf.get_uint(experts_key)) + ", but ditto runs '" +
                              name + "' files without experts"
                        : "GGUF: a '" + name + "' file needs experts (" + experts_key + " of at least 1)");
  throw Error("GGUF architecture '" + name + "' is not supported; ditto runs " + architecture_names());
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& gguf) {
  const Architecture& family = gguf_architecture(gguf);
  const std::string arch = gguf.get_string("general.architecture") + ".";
  // The metadata in config.json's terms, so that one reader checks both kinds of file; the
  // messages name the GGUF keys.
  nlohmann::json config = {{"model_type", std::string(family.name)}};
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
  // No sliding window: llama.cpp writes Mistral's and Mixtral's files as llama, which has none,
  // and runs Phi-3's with its attention.sliding_window disabled; transformers' GGUF loader reads
  // none either. So the files compute what both references compute from them.
  config["sliding_window"] = nullptr;
  if (family.experts) {
    // llama.cpp renormalises the chosen experts' weights for both families (Qwen3-MoE's
    // norm_topk_prob), and gives Qwen3-MoE's experts a size of their own.
    for (const GgufKey& key : {GgufKey{"expert_count", "num_local_experts", true},
                               GgufKey{"expert_used_count", "num_experts_per_tok", true},
                               GgufKey{"expert_feed_forward_length", "moe_intermediate_size", false}})
      read(key);
    config["norm_topk_prob"] = true;
  }

  const GgufTensorInfo* embedding = find_tensor(gguf, "token_embd.weight");
  if (embedding == nullptr || embedding->shape.size() != 2) throw Error("GGUF: no 2-D tensor 'token_embd.weight'");
  names["vocab_size"] = "the rows of token_embd.weight";
  config["vocab_size"] = embedding->shape[0];
  config["tie_word_embeddings"] = find_tensor(gguf, "output.weight") == nullptr;
  for (const char* id : {"bos_token_id", "eos_token_id"}) {
    names[id] = std::string("tokenizer.ggml.") + id;
    if (gguf.has(names[id])) config[id] = gguf.get_uint(names[id]);
  }
  for (const GgufKey& key : family.gguf_keys) read(key);
  if (family.gguf_conventions) family.gguf_conventions(config);
  const ModelConfig c = model_config_from_json(config, "GGUF", names);
  if (gguf.has(arch + "attention.value_length") && gguf.get_uint(arch + "attention.value_length") != c.head_dim)
    throw Error("GGUF: value heads of another size than key heads are not supported");
  if (gguf.has(arch + "rope.dimension_count") && gguf.get_uint(arch + "rope.dimension_count") != c.head_dim)
    throw Error("GGUF: RoPE on part of each head (rope.dimension_count != head size) is not supported");
  return c;
}

TensorStore gguf_tensor_store(std::shared_ptr<MappedFile> file, const GgufFile& gguf, const ModelConfig& config) {
  const Architecture& family = gguf_architecture(gguf);
  const std::string origin = "'" + file->path() + "'";
  const auto refuse = [&](const std::string& name) {
    throw Error(file->path() + ": tensor '" + name + "' is not part of a " + std::string(family.name) +
                " decoder as ditto runs it");
  };
  std::map<std::string, std::string> gguf_names;  // transformers' name -> the file's
  TensorStore store;
  store.set_file_naming([&family](const std::string& name) { return gguf_tensor_name(name, family); });
  for (const GgufTensorInfo& tensor : gguf.tensors) {
    const std::byte* data = file->data() + gguf.data_offset + tensor.offset;
    std::string prefix, suffix;
    if (expert_tensor_names(tensor.name, family, prefix, suffix)) {
      // experts x rows x cols: each expert's matrix, whole blocks of rows one after another.
      if (tensor.shape.size() != 3 || tensor.shape[0] == 0)
        throw Error(file->path() + ": tensor '" + tensor.name + "' must have 3 dimensions (experts, rows, columns)");
      const size_t experts = tensor.shape[0], bytes = tensor.bytes / experts;
      for (size_t e = 0; e < experts; ++e) {
        const std::string name = prefix + std::to_string(e) + "." + suffix;
        store.add(name, TensorView{tensor.dtype, {tensor.shape[1], tensor.shape[2]}, data + e * bytes, bytes}, origin);
        gguf_names[name] = tensor.name;
      }
      continue;
    }
    const std::string name = hf_tensor_name(tensor.name, family);
    if (name.empty()) refuse(tensor.name);
    store.add(name, TensorView{tensor.dtype, tensor.shape, data, tensor.bytes}, origin);
    gguf_names[name] = tensor.name;
  }
  // A tensor of a known name that this model does not use (biases on a llama, experts beyond
  // expert_count) would be left out of the computation.
  for (const std::string& name : unread_tensors(store, config)) refuse(gguf_names[name]);
  store.add_file(std::move(file));
  return store;
}

}  // namespace ditto
