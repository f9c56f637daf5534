#include "model/weights.h"

#include <string>

#include "ditto/error.h"

namespace ditto {

namespace {

std::string shape_text(const std::vector<size_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

const TensorView& checked(const TensorStore& store, const std::string& name, std::vector<size_t> shape) {
  const TensorView& tensor = store.get(name);
  if (tensor.shape != shape)
    throw Error("tensor '" + name + "' has shape " + shape_text(tensor.shape) + " but the config implies " +
                shape_text(shape));
  return tensor;
}

PackedMatrix matrix(const TensorStore& store, const std::string& name, size_t rows, size_t cols,
                    std::span<const size_t> source_rows = {}) {
  const TensorView& tensor = checked(store, name, {rows, cols});
  return PackedMatrix::pack(tensor.dtype, rows, cols, tensor.data, source_rows);
}

std::vector<float> vector(const TensorStore& store, const std::string& name, size_t length) {
  const TensorView& tensor = checked(store, name, {length});
  if (is_quantized(tensor.dtype))
    throw Error("tensor '" + name + "' is " + dtype_name(tensor.dtype) + "; a vector must be f32, f16 or bf16");
  std::vector<float> values(length);
  for (size_t i = 0; i < length; ++i) values[i] = load_as_f32(tensor.data, tensor.dtype, i);
  return values;
}

// llama.cpp's layout of q/k rows: within each head of head_dim rows, row 2i + j holds the row
// j * head_dim/2 + i of transformers' layout (the halves that rotate-half RoPE pairs up are
// interleaved). Returns, for each transformers row, the row of the file that holds it.
std::vector<size_t> interleaved_rope_rows(size_t heads, size_t head_dim) {
  std::vector<size_t> rows(heads * head_dim);
  const size_t half = head_dim / 2;
  for (size_t h = 0; h < heads; ++h)
    for (size_t j = 0; j < 2; ++j)
      for (size_t i = 0; i < half; ++i) rows[h * head_dim + j * half + i] = h * head_dim + 2 * i + j;
  return rows;
}

}  // namespace

std::unique_ptr<ModelWeights> pack_hf_weights(const TensorStore& store, const ModelConfig& c, QkLayout qk_layout) {
  auto weights = std::make_unique<ModelWeights>();
  const size_t q_width = c.heads * c.head_dim;
  const size_t kv_width = c.kv_heads * c.head_dim;
  std::vector<size_t> q_rows, k_rows;  // empty: as stored
  if (qk_layout == QkLayout::InterleavedRope) {
    q_rows = interleaved_rope_rows(c.heads, c.head_dim);
    k_rows = interleaved_rope_rows(c.kv_heads, c.head_dim);
  }
  weights->embedding = matrix(store, "model.embed_tokens.weight", c.vocab_size, c.hidden_size);
  for (size_t i = 0; i < c.layers; ++i) {
    const std::string prefix = "model.layers." + std::to_string(i) + ".";
    LayerWeights layer;
    layer.attention_norm = vector(store, prefix + "input_layernorm.weight", c.hidden_size);
    layer.q = matrix(store, prefix + "self_attn.q_proj.weight", q_width, c.hidden_size, q_rows);
    layer.k = matrix(store, prefix + "self_attn.k_proj.weight", kv_width, c.hidden_size, k_rows);
    layer.v = matrix(store, prefix + "self_attn.v_proj.weight", kv_width, c.hidden_size);
    layer.o = matrix(store, prefix + "self_attn.o_proj.weight", c.hidden_size, q_width);
    if (c.qk_norm) {
      layer.q_norm = vector(store, prefix + "self_attn.q_norm.weight", c.head_dim);
      layer.k_norm = vector(store, prefix + "self_attn.k_norm.weight", c.head_dim);
    }
    layer.mlp_norm = vector(store, prefix + "post_attention_layernorm.weight", c.hidden_size);
    layer.gate = matrix(store, prefix + "mlp.gate_proj.weight", c.intermediate_size, c.hidden_size);
    layer.up = matrix(store, prefix + "mlp.up_proj.weight", c.intermediate_size, c.hidden_size);
    layer.down = matrix(store, prefix + "mlp.down_proj.weight", c.hidden_size, c.intermediate_size);
    weights->layers.push_back(std::move(layer));
  }
  weights->final_norm = vector(store, "model.norm.weight", c.hidden_size);
  if (!c.tied_embeddings) weights->output = matrix(store, "lm_head.weight", c.vocab_size, c.hidden_size);
  return weights;
}

}  // namespace ditto
