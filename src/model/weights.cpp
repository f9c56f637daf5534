#include "model/weights.h"

#include <algorithm>
#include <set>
#include <string>

#include "ditto/error.h"
#include "tensor/checked.h"

namespace ditto {

namespace {

std::string shape_text(const std::vector<size_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// Takes the decoder's tensors from a store, checking each against the shape the config implies.
// A dry run checks and counts the memory packing would take, without packing: the whole model is
// checked, and its memory known, before anything is allocated.
class Packer {
 public:
  // `norms_add_one`: the store holds w of norms that act as 1 + w.
  Packer(const TensorStore& store, bool dry_run, Numerics numerics, bool norms_add_one)
      : store_(store), dry_run_(dry_run), norms_add_one_(norms_add_one), numerics_(numerics) {}

  // A rows x cols matrix; with source_rows, output n is row source_rows[n] of a tensor of
  // stored_rows rows (a part of a fused matrix, or q/k rows in another order).
  PackedMatrix matrix(const std::string& name, size_t rows, size_t cols, std::span<const size_t> source_rows = {},
                      size_t stored_rows = 0) {
    const TensorView& tensor = checked(name, {stored_rows ? stored_rows : rows, cols});
    add(PackedMatrix::packed_bytes(tensor.dtype, rows, cols, numerics_));
    return dry_run_ ? PackedMatrix() : PackedMatrix::pack(tensor.dtype, rows, cols, tensor.data, source_rows, numerics_);
  }
  // A matrix of one of a mixture's experts, counted apart too (a row reads only some of them).
  PackedMatrix expert_matrix(const std::string& name, size_t rows, size_t cols) {
    const size_t before = bytes_;
    PackedMatrix matrix = this->matrix(name, rows, cols);
    expert_bytes_ += bytes_ - before;
    return matrix;
  }

  // A vector of `length` values; with source_rows, value i is element source_rows[i].
  std::vector<float> vector(const std::string& name, size_t length, std::span<const size_t> source_rows = {}) {
    const TensorView& tensor = checked(name, {length});
    if (is_quantized(tensor.dtype))
      throw Error("tensor " + store_.describe(name) + " is " + dtype_name(tensor.dtype) + "; a vector must be f32, f16 or bf16");
    add(checked_mul(length, sizeof(float), "a vector"));
    if (dry_run_) return {};
    std::vector<float> values(length);
    for (size_t i = 0; i < length; ++i) values[i] = load_as_f32(tensor.data, tensor.dtype, source_rows.empty() ? i : source_rows[i]);
    return values;
  }

  // An RMSNorm's weights as the norm applies them: 1 + w computed in f32, as Gemma3RMSNorm does.
  std::vector<float> norm(const std::string& name, size_t length) {
    std::vector<float> weights = vector(name, length);
    if (norms_add_one_)
      for (float& w : weights) w = 1.0f + w;
    return weights;
  }

  size_t bytes() const { return bytes_; }
  size_t expert_bytes() const { return expert_bytes_; }
  bool has(const std::string& name) const { return store_.contains(name); }
  const std::set<std::string>& read() const { return read_; }

 private:
  const TensorView& checked(const std::string& name, const std::vector<size_t>& shape) {
    const TensorView& tensor = store_.get(name);
    read_.insert(name);
    if (tensor.shape != shape)
      throw Error("tensor " + store_.describe(name) + " has shape " + shape_text(tensor.shape) +
                  " but the config implies " + shape_text(shape));
    return tensor;
  }
  void add(size_t bytes) { bytes_ = checked_add(bytes_, bytes, "the packed weights' size"); }

  const TensorStore& store_;
  bool dry_run_, norms_add_one_;
  Numerics numerics_;
  size_t bytes_ = 0, expert_bytes_ = 0;
  std::set<std::string> read_;
};

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

// Rows first .. first + count - 1 of a matrix, in the order `order` gives (empty: as stored).
std::vector<size_t> rows_from(size_t first, size_t count, const std::vector<size_t>& order = {}) {
  std::vector<size_t> rows(count);
  for (size_t i = 0; i < count; ++i) rows[i] = first + (order.empty() ? i : order[i]);
  return rows;
}

// Every tensor of the decoder, in one list for the dry run and the packing.
std::unique_ptr<ModelWeights> take_weights(Packer& take, const ModelConfig& c, QkLayout qk_layout, ModelPart part) {
  const Architecture& family = *find_architecture(c.architecture_name);
  part.end_layer = std::min(part.end_layer, c.layers);
  if (part.first_layer >= part.end_layer)
    throw Error("layers " + std::to_string(part.first_layer) + ".." + std::to_string(part.end_layer) +
                " hold no layer of a model of " + std::to_string(c.layers));
  auto weights = std::make_unique<ModelWeights>();
  weights->part = part;
  const size_t q_width = c.heads * c.head_dim;
  const size_t kv_width = c.kv_heads * c.head_dim;
  std::vector<size_t> q_order, k_order;  // empty: as stored
  if (qk_layout == QkLayout::InterleavedRope) {
    q_order = interleaved_rope_rows(c.heads, c.head_dim);
    k_order = interleaved_rope_rows(c.kv_heads, c.head_dim);
  }
  if (part.embedding || (part.head && c.tied_embeddings))
    weights->embedding = take.matrix("model.embed_tokens.weight", c.vocab_size, c.hidden_size);
  for (size_t i = part.first_layer; i < part.end_layer; ++i) {
    const std::string prefix = "model.layers." + std::to_string(i) + ".";
    LayerWeights layer;
    layer.attention_norm = take.norm(prefix + "input_layernorm.weight", c.hidden_size);
    if (family.fused_projections) {
      const std::string qkv = prefix + "self_attn.qkv_proj.weight";
      const size_t fused = q_width + 2 * kv_width;
      layer.q = take.matrix(qkv, q_width, c.hidden_size, rows_from(0, q_width, q_order), fused);
      layer.k = take.matrix(qkv, kv_width, c.hidden_size, rows_from(q_width, kv_width, k_order), fused);
      layer.v = take.matrix(qkv, kv_width, c.hidden_size, rows_from(q_width + kv_width, kv_width), fused);
    } else {
      layer.q = take.matrix(prefix + "self_attn.q_proj.weight", q_width, c.hidden_size, q_order);
      layer.k = take.matrix(prefix + "self_attn.k_proj.weight", kv_width, c.hidden_size, k_order);
      layer.v = take.matrix(prefix + "self_attn.v_proj.weight", kv_width, c.hidden_size);
    }
    if (c.qkv_bias) {
      layer.q_bias = take.vector(prefix + "self_attn.q_proj.bias", q_width, q_order);
      layer.k_bias = take.vector(prefix + "self_attn.k_proj.bias", kv_width, k_order);
      layer.v_bias = take.vector(prefix + "self_attn.v_proj.bias", kv_width);
    }
    layer.o = take.matrix(prefix + "self_attn.o_proj.weight", c.hidden_size, q_width);
    if (c.qk_norm) {
      layer.q_norm = take.norm(prefix + "self_attn.q_norm.weight", c.head_dim);
      layer.k_norm = take.norm(prefix + "self_attn.k_norm.weight", c.head_dim);
    }
    // post_attention_layernorm is the MLP's input norm in Llama, the attention output's in Gemma.
    if (c.post_norms) {
      layer.post_attention_norm = take.norm(prefix + "post_attention_layernorm.weight", c.hidden_size);
      layer.mlp_norm = take.norm(prefix + "pre_feedforward_layernorm.weight", c.hidden_size);
      layer.post_mlp_norm = take.norm(prefix + "post_feedforward_layernorm.weight", c.hidden_size);
    } else {
      layer.mlp_norm = take.norm(prefix + "post_attention_layernorm.weight", c.hidden_size);
    }
    if (c.sparse(i)) {
      const ExpertNames& names = *family.experts;
      layer.router = take.matrix(prefix + std::string(names.router), c.experts, c.hidden_size);
      for (size_t e = 0; e < c.experts; ++e) {
        const std::string expert = prefix + std::string(names.expert) + std::to_string(e) + ".";
        const size_t width = c.expert_intermediate_size;
        layer.experts.push_back({take.expert_matrix(expert + std::string(names.gate), width, c.hidden_size),
                                 take.expert_matrix(expert + std::string(names.up), width, c.hidden_size),
                                 take.expert_matrix(expert + std::string(names.down), c.hidden_size, width)});
      }
    } else if (family.fused_projections) {
      const std::string gate_up = prefix + "mlp.gate_up_proj.weight";
      const size_t width = c.intermediate_size;
      layer.gate = take.matrix(gate_up, width, c.hidden_size, rows_from(0, width), 2 * width);
      layer.up = take.matrix(gate_up, width, c.hidden_size, rows_from(width, width), 2 * width);
    } else {
      layer.gate = take.matrix(prefix + "mlp.gate_proj.weight", c.intermediate_size, c.hidden_size);
      layer.up = take.matrix(prefix + "mlp.up_proj.weight", c.intermediate_size, c.hidden_size);
    }
    if (!c.sparse(i)) layer.down = take.matrix(prefix + "mlp.down_proj.weight", c.hidden_size, c.intermediate_size);
    weights->layers.push_back(std::move(layer));
  }
  if (take.has("rope_freqs.weight")) weights->rope_divisors = take.vector("rope_freqs.weight", c.head_dim / 2);
  if (!part.head) return weights;
  weights->final_norm = take.norm("model.norm.weight", c.hidden_size);
  if (!c.tied_embeddings) weights->output = take.matrix("lm_head.weight", c.vocab_size, c.hidden_size);
  return weights;
}

bool has_quantized_tensors(const TensorStore& store) {
  for (const auto& [name, tensor] : store.tensors())
    if (is_quantized(tensor.dtype)) return true;
  return false;
}

}  // namespace

Numerics default_numerics(const TensorStore& store) {
  return has_quantized_tensors(store) ? kQuantizedDefault : Numerics::Exact;
}

size_t check_hf_weights(const TensorStore& store, const ModelConfig& config, const ModelPart& part, Numerics numerics) {
  Packer check(store, /*dry_run=*/true, numerics, /*norms_add_one=*/false);
  take_weights(check, config, QkLayout::Transformers, part);
  return check.bytes();
}

size_t streamed_hf_weight_bytes(const TensorStore& store, const ModelConfig& config, const ModelPart& part,
                                 Numerics numerics) {
  Packer check(store, /*dry_run=*/true, numerics, /*norms_add_one=*/false);
  take_weights(check, config, QkLayout::Transformers, part);
  const size_t experts = check.expert_bytes();
  return check.bytes() - experts + (config.experts ? experts / config.experts * config.experts_per_token : 0);
}

std::vector<std::string> unread_tensors(const TensorStore& store, const ModelConfig& config) {
  Packer check(store, /*dry_run=*/true, Numerics::Exact, /*norms_add_one=*/false);
  take_weights(check, config, QkLayout::Transformers, ModelPart{});
  std::vector<std::string> unread;
  for (const auto& [name, tensor] : store.tensors())
    if (!check.read().count(name)) unread.push_back(name);
  return unread;
}

std::unique_ptr<ModelWeights> pack_hf_weights(const TensorStore& store, const ModelConfig& config, StoredLayout layout,
                                              const ModelPart& part, std::optional<Numerics> numerics) {
  const Numerics chosen = numerics.value_or(default_numerics(store));
  require_memory(check_hf_weights(store, config, part, chosen), "packing the model's weights");
  Packer pack(store, /*dry_run=*/false, chosen, config.norm_adds_one && !layout.norms_hold_one_plus_w);
  auto weights = take_weights(pack, config, layout.qk, part);
  weights->numerics = has_quantized_tensors(store) ? chosen : Numerics::Exact;
  return weights;
}

}  // namespace ditto
