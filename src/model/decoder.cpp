// The decoder of Qwen3 and Llama: pre-norm blocks of GQA attention with RoPE and a SwiGLU
// MLP. Qwen3 adds an RMSNorm on every q and k head before RoPE.
#include "model/decoder.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "model/weights.h"
#include "tensor/checked.h"

namespace ditto {

namespace {

// Floats per row of each buffer of DecoderScratch, in its order (x, normed, ..., sin).
std::array<size_t, 11> scratch_widths(const ModelConfig& c) {
  const size_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  return {c.hidden_size, c.hidden_size, c.hidden_size,    q_width,        kv_width,         kv_width,
          q_width,       c.intermediate_size, c.intermediate_size, c.head_dim / 2, c.head_dim / 2};
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
  const size_t rows = batch.positions.size();
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

  const ref::AttentionParams attention{ref::AttentionParams::inverse_sqrt_scale(double(c.head_dim))};
  if (!w.part.embedding) std::copy(batch.hidden, batch.hidden + rows * hidden, x.begin());
  for (size_t t = 0; t < rows; ++t) {
    if (w.part.embedding) kernels::embedding_row(w.embedding.view(), size_t(batch.tokens[t]), &x[t * hidden]);
    kernels::rope_angles(c.rope_theta, c.head_dim, batch.positions[t], &cos[t * c.head_dim / 2],
                         &sin[t * c.head_dim / 2]);
  }
  if (w.part.embedding) observe(0, {{"embedding", &x}});

  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& layer = w.layers[i];
    const size_t l = w.part.first_layer + i;
    kernels::rmsnorm(x.data(), rows, hidden, layer.attention_norm.data(), c.rms_norm_eps, normed.data());
    kernels::matmul(normed.data(), rows, layer.q.view(), q.data(), threads);
    kernels::matmul(normed.data(), rows, layer.k.view(), k.data(), threads);
    kernels::matmul(normed.data(), rows, layer.v.view(), v.data(), threads);
    if (c.qk_norm) {
      kernels::rmsnorm(q.data(), rows * c.heads, c.head_dim, layer.q_norm.data(), c.rms_norm_eps, q.data());
      kernels::rmsnorm(k.data(), rows * c.kv_heads, c.head_dim, layer.k_norm.data(), c.rms_norm_eps, k.data());
    }
    for (size_t t = 0; t < rows; ++t) {
      kernels::rope(&q[t * q_width], c.heads, c.head_dim, &cos[t * c.head_dim / 2], &sin[t * c.head_dim / 2]);
      kernels::rope(&k[t * kv_width], c.kv_heads, c.head_dim, &cos[t * c.head_dim / 2], &sin[t * c.head_dim / 2]);
      cache[i].write(batch.kv_slots[t].block, batch.kv_slots[t].slot, &k[t * kv_width], &v[t * kv_width]);
    }
    // Update, then fetch: attention reads this pass's keys and values back from the cache.
    kernels::attention(q.data(), batch.attention, cache[i], c.heads, attention, attended.data(), threads);
    kernels::matmul(attended.data(), rows, layer.o.view(), projected.data(), threads);
    for (size_t i = 0; i < rows * hidden; ++i) x[i] = x[i] + projected[i];
    // q and k as attention read them: after their norm (Qwen3) and RoPE.
    observe(l, {{"attn_norm", &normed}, {"q", &q}, {"k", &k}, {"v", &v}, {"attention", &attended},
                {"o_proj", &projected}, {"attn_residual", &x}});

    kernels::rmsnorm(x.data(), rows, hidden, layer.mlp_norm.data(), c.rms_norm_eps, normed.data());
    kernels::matmul(normed.data(), rows, layer.gate.view(), gate.data(), threads);
    kernels::matmul(normed.data(), rows, layer.up.view(), up.data(), threads);
    kernels::silu_mul(gate.data(), up.data(), rows * c.intermediate_size, gate.data());
    kernels::matmul(gate.data(), rows, layer.down.view(), projected.data(), threads);
    for (size_t i = 0; i < rows * hidden; ++i) x[i] = x[i] + projected[i];
    observe(l, {{"mlp_norm", &normed}, {"up", &up}, {"silu_mul", &gate}, {"down", &projected}, {"mlp_residual", &x}});
  }

  if (!w.part.head || batch.logit_rows.empty()) return;
  for (size_t i = 0; i < batch.logit_rows.size(); ++i)
    kernels::rmsnorm(&x[batch.logit_rows[i] * hidden], 1, hidden, w.final_norm.data(), c.rms_norm_eps, &normed[i * hidden]);
  kernels::matmul(normed.data(), batch.logit_rows.size(), w.output_matrix(), logits, threads);
}

}  // namespace ditto
