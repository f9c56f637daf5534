// GGUF files of the llama and qwen3 architectures: metadata to ModelConfig, tensor names to
// transformers' names.
#include <algorithm>

#include "ditto/error.h"
#include "model/config.h"
#include "model/gguf.h"

namespace ditto {

namespace {

size_t positive(const GgufFile& gguf, const std::string& key) {
  const uint64_t value = gguf.get_uint(key);
  if (value == 0 || value > (uint64_t(1) << 32)) throw Error("GGUF metadata '" + key + "' must be a positive size");
  return size_t(value);
}

const GgufTensorInfo* find_tensor(const GgufFile& gguf, const std::string& name) {
  for (const GgufTensorInfo& tensor : gguf.tensors)
    if (tensor.name == name) return &tensor;
  return nullptr;
}

// transformers' name for a GGUF tensor of a llama or qwen3 decoder, or "" for another tensor.
std::string hf_tensor_name(const std::string& name) {
  if (name == "token_embd.weight") return "model.embed_tokens.weight";
  if (name == "output_norm.weight") return "model.norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  const std::string block = "blk.";
  if (name.compare(0, block.size(), block) != 0) return "";
  const size_t dot = name.find('.', block.size());
  const std::string layer = name.substr(block.size(), dot == std::string::npos ? 0 : dot - block.size());
  if (layer.empty() || layer.size() > 6 || !std::all_of(layer.begin(), layer.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return "";
  static const std::pair<const char*, const char*> parts[] = {
      {"attn_norm.weight", "input_layernorm.weight"},  {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},    {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"}, {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},     {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  const std::string part = name.substr(dot + 1);
  for (const auto& [gguf_part, hf_part] : parts)
    if (part == gguf_part) return "model.layers." + std::to_string(std::stoul(layer)) + "." + hf_part;
  return "";
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& gguf) {
  ModelConfig c;
  if (!set_architecture(c, gguf.get_string("general.architecture")))
    throw Error("GGUF architecture '" + c.architecture_name + "' is not supported; ditto runs qwen3 and llama");
  const std::string arch = c.architecture_name + ".";
  c.layers = positive(gguf, arch + "block_count");
  c.hidden_size = positive(gguf, arch + "embedding_length");
  c.intermediate_size = positive(gguf, arch + "feed_forward_length");
  c.heads = positive(gguf, arch + "attention.head_count");
  c.kv_heads = gguf.has(arch + "attention.head_count_kv") ? positive(gguf, arch + "attention.head_count_kv") : c.heads;
  c.head_dim = gguf.has(arch + "attention.key_length") ? positive(gguf, arch + "attention.key_length")
                                                       : c.hidden_size / c.heads;
  if (gguf.has(arch + "attention.value_length") && positive(gguf, arch + "attention.value_length") != c.head_dim)
    throw Error("GGUF: value heads of another size than key heads are not supported");
  if (gguf.has(arch + "rope.dimension_count") && positive(gguf, arch + "rope.dimension_count") != c.head_dim)
    throw Error("GGUF: RoPE on part of each head (rope.dimension_count != head size) is not supported");
  if (gguf.has(arch + "rope.scaling.type") && gguf.get_string(arch + "rope.scaling.type") != "none")
    throw Error("GGUF: rope scaling of type '" + gguf.get_string(arch + "rope.scaling.type") +
                "' is not supported (only plain RoPE)");
  if (gguf.has(arch + "expert_count") && gguf.get_uint(arch + "expert_count") != 0)
    throw Error("GGUF: mixture-of-experts models are not supported");
  c.max_positions = positive(gguf, arch + "context_length");
  c.rms_norm_eps = gguf.get_float(arch + "attention.layer_norm_rms_epsilon");
  c.rope_theta = gguf.has(arch + "rope.freq_base") ? gguf.get_float(arch + "rope.freq_base") : 10000.0;
  if (!(c.rope_theta > 0.0) || !(c.rms_norm_eps >= 0.0f)) throw Error("GGUF: rope.freq_base or the RMSNorm epsilon is out of range");
  check_attention_shape(c, "GGUF");

  const GgufTensorInfo* embedding = find_tensor(gguf, "token_embd.weight");
  if (embedding == nullptr || embedding->shape.size() != 2) throw Error("GGUF: no 2-D tensor 'token_embd.weight'");
  c.vocab_size = embedding->shape[0];
  c.tied_embeddings = find_tensor(gguf, "output.weight") == nullptr;
  if (gguf.has("tokenizer.ggml.bos_token_id")) c.bos_token_id = int64_t(gguf.get_uint("tokenizer.ggml.bos_token_id"));
  if (gguf.has("tokenizer.ggml.eos_token_id")) c.eos_token_id = int64_t(gguf.get_uint("tokenizer.ggml.eos_token_id"));
  return c;
}

TensorStore gguf_tensor_store(std::shared_ptr<MappedFile> file, const GgufFile& gguf) {
  TensorStore store;
  for (const GgufTensorInfo& tensor : gguf.tensors) {
    const std::string name = hf_tensor_name(tensor.name);
    if (name.empty())
      throw Error(file->path() + ": tensor '" + tensor.name +
                  "' is not part of a decoder ditto runs (llama or qwen3, without biases or rope scaling)");
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
