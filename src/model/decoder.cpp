// The decoder of every family in the registry: pre-norm blocks of GQA attention with RoPE and a
// gated MLP. The families' differences are flags of ModelConfig: an RMSNorm on every q and k
// head before RoPE (Qwen3, Gemma 3), a sliding window and a RoPE base per layer, and Gemma 3's
// scaled embedding, norms after the attention and the MLP, GELU-tanh and logit softcapping.
#include "model/decoder.h"

#include <array>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "model/weights.h"
#include "tensor/checked.h"

namespace ditto {

namespace {

// The RoPE bases the layers use, each with its table of angles: rope_theta, and
// rope_local_theta when a layer with a window has that one (Gemma 3's local layers).
size_t rope_bases(const ModelConfig& c) {
  for (size_t l = 0; l < c.layers; ++l)
    if (c.layer_rope_theta(l) != c.rope_theta) return 2;
  return 1;
}

// Floats per row of each buffer of DecoderScratch, in its order (x, normed, ..., sin).
std::array<size_t, 11> scratch_widths(const ModelConfig& c) {
  const size_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  const size_t angles = c.head_dim / 2 * rope_bases(c);
  return {c.hidden_size, c.hidden_size, c.hidden_size,    q_width, kv_width, kv_width,
          q_width,       c.intermediate_size, c.intermediate_size, angles,   angles};
}

}  // namespace

size_t decoder_scratch_bytes(const ModelConfig& config, size_t rows) {
  size_t floats = 0;
  for (const size_t width : scratch_widths(config)) floats = checked_add(floats, width, "a decoder row's scratch");
  return checked_product("the scratch of a forward pass of " + std::to_string(rows) + " rows", floats, rows, sizeof(float));
}

void decoder_forward(const Model& model, std::span<const ref::KVLayerView> cache, const ForwardRows& batch,
                     float* logits, int threads, DecoderScratch& scratch, ForwardObserver* observer) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const size_t rows = batch.tokens.size();
  const size_t hidden = c.hidden_size;
  const size_t q_width = c.heads * c.head_dim;
  const size_t kv_width = c.kv_heads * c.head_dim;

  const std::array<size_t, 11> widths = scratch_widths(c);
  std::vector<float>* buffers[] = {&scratch.x, &scratch.normed, &scratch.projected, &scratch.q,  &scratch.k,  &scratch.v,
                                   &scratch.attended, &scratch.gate, &scratch.up, &scratch.cos, &scratch.sin};
  for (size_t i = 0; i < widths.size(); ++i) buffers[i]->resize(rows * widths[i]);
  auto &x = scratch.x, &normed = scratch.normed, &projected = scratch.projected, &q = scratch.q, &k = scratch.k,
       &v = scratch.v, &attended = scratch.attended, &gate = scratch.gate, &up = scratch.up, &cos = scratch.cos,
       &sin = scratch.sin;
  // Tracing (ditto verify --trace): hands the observer intermediates, each `rows` rows of a buffer.
  using Named = std::pair<const char*, const std::vector<float>*>;
  const auto observe = [&](size_t layer, std::initializer_list<Named> outputs) {
    if (!observer) return;
    for (const auto& [name, values] : outputs)
      observer->observe(layer, name, batch.positions, values->data(), values->size() / rows);
  };

  // Row t's angles at [t * half] for rope_theta, at [(rows + t) * half] for rope_local_theta.
  const size_t half = c.head_dim / 2, bases = rope_bases(c);
  for (size_t t = 0; t < rows; ++t) {
    kernels::embedding_row(w.embedding.view(), size_t(batch.tokens[t]), &x[t * hidden]);
    for (size_t b = 0; b < bases; ++b)
      kernels::rope_angles(b == 0 ? c.rope_theta : c.rope_local_theta, c.head_dim, batch.positions[t],
                           &cos[(b * rows + t) * half], &sin[(b * rows + t) * half]);
  }
  if (c.embedding_scale != 1.0f)
    for (size_t i = 0; i < rows * hidden; ++i) x[i] = x[i] * c.embedding_scale;
  observe(0, {{"embedding", &x}});

  const float scale = ref::AttentionParams::inverse_sqrt_scale(c.query_pre_attn_scalar != 0.0 ? c.query_pre_attn_scalar
                                                                                               : double(c.head_dim));
  const auto activation = c.activation == ModelConfig::Activation::GeluTanh ? kernels::gelu_tanh_mul : kernels::silu_mul;
  const char* activation_name = c.activation == ModelConfig::Activation::GeluTanh ? "gelu_mul" : "silu_mul";
  for (size_t l = 0; l < c.layers; ++l) {
    const LayerWeights& layer = w.layers[l];
    const size_t angles = c.layer_rope_theta(l) == c.rope_theta ? 0 : rows * half;
    kernels::rmsnorm(x.data(), rows, hidden, layer.attention_norm.data(), c.rms_norm_eps, normed.data());
    kernels::matmul(normed.data(), rows, layer.q.view(), q.data(), threads);
    kernels::matmul(normed.data(), rows, layer.k.view(), k.data(), threads);
    kernels::matmul(normed.data(), rows, layer.v.view(), v.data(), threads);
    if (c.qk_norm) {
      kernels::rmsnorm(q.data(), rows * c.heads, c.head_dim, layer.q_norm.data(), c.rms_norm_eps, q.data());
      kernels::rmsnorm(k.data(), rows * c.kv_heads, c.head_dim, layer.k_norm.data(), c.rms_norm_eps, k.data());
    }
    for (size_t t = 0; t < rows; ++t) {
      const float *row_cos = &cos[angles + t * half], *row_sin = &sin[angles + t * half];
      kernels::rope(&q[t * q_width], c.heads, c.head_dim, row_cos, row_sin);
      kernels::rope(&k[t * kv_width], c.kv_heads, c.head_dim, row_cos, row_sin);
      cache[l].write(batch.kv_slots[t].block, batch.kv_slots[t].slot, &k[t * kv_width], &v[t * kv_width]);
    }
    // Update, then fetch: attention reads this pass's keys and values back from the cache.
    kernels::attention(q.data(), batch.attention, cache[l], c.heads, {scale, c.window(l)}, attended.data(), threads);
    kernels::matmul(attended.data(), rows, layer.o.view(), projected.data(), threads);
    // q and k as attention read them: after their norm (Qwen3) and RoPE.
    observe(l, {{"attn_norm", &normed}, {"q", &q}, {"k", &k}, {"v", &v}, {"attention", &attended}, {"o_proj", &projected}});
    if (c.post_norms) {
      kernels::rmsnorm(projected.data(), rows, hidden, layer.post_attention_norm.data(), c.rms_norm_eps, projected.data());
      observe(l, {{"post_attn_norm", &projected}});
    }
    for (size_t i = 0; i < rows * hidden; ++i) x[i] = x[i] + projected[i];
    observe(l, {{"attn_residual", &x}});

    kernels::rmsnorm(x.data(), rows, hidden, layer.mlp_norm.data(), c.rms_norm_eps, normed.data());
    kernels::matmul(normed.data(), rows, layer.gate.view(), gate.data(), threads);
    kernels::matmul(normed.data(), rows, layer.up.view(), up.data(), threads);
    activation(gate.data(), up.data(), rows * c.intermediate_size, gate.data());
    kernels::matmul(gate.data(), rows, layer.down.view(), projected.data(), threads);
    observe(l, {{"mlp_norm", &normed}, {"up", &up}, {activation_name, &gate}, {"down", &projected}});
    if (c.post_norms) {
      kernels::rmsnorm(projected.data(), rows, hidden, layer.post_mlp_norm.data(), c.rms_norm_eps, projected.data());
      observe(l, {{"post_mlp_norm", &projected}});
    }
    for (size_t i = 0; i < rows * hidden; ++i) x[i] = x[i] + projected[i];
    observe(l, {{"mlp_residual", &x}});
  }

  if (batch.logit_rows.empty()) return;
  for (size_t i = 0; i < batch.logit_rows.size(); ++i)
    kernels::rmsnorm(&x[batch.logit_rows[i] * hidden], 1, hidden, w.final_norm.data(), c.rms_norm_eps, &normed[i * hidden]);
  kernels::matmul(normed.data(), batch.logit_rows.size(), w.output_matrix(), logits, threads);
  if (c.final_logit_softcap != 0.0f) kernels::softcap(logits, batch.logit_rows.size() * c.vocab_size, c.final_logit_softcap);
}

}  // namespace ditto
