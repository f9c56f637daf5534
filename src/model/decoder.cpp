// The decoder of every family in the registry: pre-norm blocks of GQA attention with RoPE and a
// gated MLP or a mixture of SwiGLU experts. The families' differences are flags of ModelConfig:
// an RMSNorm on every q and k head before RoPE (Qwen3, Gemma 3), biases on q, k and v (Qwen2), a
// sliding window and a RoPE base per layer (Mistral, Qwen2, Gemma 3), Llama 3.1's RoPE scaling,
// experts (Mixtral, Qwen3-MoE), and Gemma 3's scaled embedding, norms after the attention and the
// MLP, GELU-tanh and logit softcapping.
#include "model/decoder.h"

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "model/weights.h"
#include "tensor/checked.h"

namespace ditto {

namespace {

// Rows from which a pass splits its work row by row over the threads (by_rows in decoder_forward):
// with fewer the hand-offs cost more than the threads share (Gemma 3 270M, 4 sequences decoding
// together on 2 threads: 277 t/s, split from 2 rows 258; 16 sequences the same either way).
constexpr size_t kSplitRows = 16;

// The RoPE bases the layers use, each with its table of angles: rope_theta, and
// rope_local_theta when a layer with a window has that one (Gemma 3's local layers).
size_t rope_bases(const ModelConfig& c) {
  for (size_t l = 0; l < c.layers; ++l)
    if (c.layer_rope_theta(l) != c.rope_theta) return 2;
  return 1;
}

// Floats per row of each per-row buffer of DecoderScratch, in its order (x, normed, ..., sin,
// router, ..., expert_out, then route_experts, 32 bits too).
std::array<size_t, 18> scratch_widths(const ModelConfig& c) {
  const size_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  const size_t k = c.experts_per_token, expert = c.expert_intermediate_size;
  const size_t expert_rows = c.experts != 0 ? c.hidden_size : 0;  // an expert's gathered input and its output
  const size_t angles = c.head_dim / 2 * rope_bases(c);
  return {c.hidden_size, c.hidden_size, c.hidden_size, q_width, kv_width, kv_width, q_width, c.intermediate_size,
          c.intermediate_size, angles, angles, c.experts, k, expert_rows, expert, expert, expert_rows, k};
}

// The MLP of a sparse layer on `normed` (rows x hidden) into `out`: each row's router picks its
// experts; every expert runs on the rows that chose it, gathered (a matmul computes each row the
// same whatever the rows beside it), and adds its output times the row's weight for it to the
// row's sum. Experts go in increasing index, so each row sums its experts in that order,
// starting from +0.0f, as transformers does (docs/numerics.md).
void mixture_of_experts(const ModelConfig& c, const LayerWeights& layer, const float* normed, size_t rows, float* out,
                        int threads, DecoderScratch& s) {
  const size_t hidden = c.hidden_size, k = c.experts_per_token, width = c.expert_intermediate_size;
  kernels::matmul(normed, rows, layer.router.view(), s.router.data(), threads);
  for (size_t t = 0; t < rows; ++t)
    kernels::route_top_k(&s.router[t * c.experts], c.experts, k, c.normalize_top_k, &s.route_experts[t * k],
                         &s.route_weights[t * k]);
  std::fill(out, out + rows * hidden, 0.0f);
  std::vector<std::pair<size_t, float>> members;  // (row, its weight for the expert)
  for (size_t e = 0; e < c.experts; ++e) {
    members.clear();
    for (size_t i = 0; i < rows * k; ++i)
      if (s.route_experts[i] == e) members.emplace_back(i / k, s.route_weights[i]);
    if (members.empty()) continue;
    for (size_t m = 0; m < members.size(); ++m)
      std::copy_n(normed + members[m].first * hidden, hidden, &s.expert_in[m * hidden]);
    const ExpertWeights& expert = layer.experts[e];
    kernels::matmuls(s.expert_in.data(), members.size(),
                     {{{expert.gate.view(), s.expert_gate.data()}, {expert.up.view(), s.expert_up.data()}}}, threads);
    kernels::silu_mul(s.expert_gate.data(), s.expert_up.data(), members.size() * width, s.expert_gate.data(), threads);
    kernels::matmul(s.expert_gate.data(), members.size(), expert.down.view(), s.expert_out.data(), threads);
    for (size_t m = 0; m < members.size(); ++m) {
      float* sum = out + members[m].first * hidden;
      const float* y = &s.expert_out[m * hidden];
      for (size_t i = 0; i < hidden; ++i) sum[i] = sum[i] + y[i] * members[m].second;
    }
  }
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
  const size_t half = c.head_dim / 2;

  const std::array<size_t, 18> widths = scratch_widths(c);
  std::vector<float>* buffers[] = {&scratch.x,          &scratch.normed,        &scratch.projected, &scratch.q,
                                   &scratch.k,          &scratch.v,             &scratch.attended,  &scratch.gate,
                                   &scratch.up,         &scratch.cos,           &scratch.sin,       &scratch.router,
                                   &scratch.route_weights, &scratch.expert_in, &scratch.expert_gate, &scratch.expert_up,
                                   &scratch.expert_out};
  for (size_t i = 0; i + 1 < widths.size(); ++i) buffers[i]->resize(rows * widths[i]);
  scratch.route_experts.resize(rows * widths.back());
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

  // The inverse frequencies of rope_theta at [0, half) and of rope_local_theta at [half, 2 half);
  // row t's angles for base b at [(b * rows + t) * half].
  const size_t bases = rope_bases(c);
  scratch.inv_freq.resize(bases * half);
  kernels::rope_inverse_frequencies(c.rope_theta, c.head_dim, scratch.inv_freq.data());
  if (const ModelConfig::Llama3Rope& r = c.llama3_rope; r.factor != 0.0)
    kernels::llama3_scale_frequencies(scratch.inv_freq.data(), half, r.factor, r.low_freq_factor, r.high_freq_factor,
                                      r.original_max_positions);
  for (size_t i = 0; i < w.rope_divisors.size(); ++i) scratch.inv_freq[i] = scratch.inv_freq[i] / w.rope_divisors[i];
  if (bases == 2) kernels::rope_inverse_frequencies(c.rope_local_theta, c.head_dim, &scratch.inv_freq[half]);
  // The work row by row between the kernels (embedding, norms, RoPE, the cache's writes, residuals),
  // on rows first .. last - 1: split over the threads from kSplitRows rows. On the calling thread
  // alone, the other waiting, it took 11% of Gemma 3 270M's pp512; split, each thread also reads
  // its rows of the kernels' outputs at once, half of them written by the other (int8, 2 threads
  // on a Xeon, medians of 5 interleaved runs: pp512 1852 -> 2004 t/s, in 16-token chunks 1355 ->
  // 1480).
  const auto by_rows = [&](const std::function<void(size_t, size_t)>& work) {
    if (threads > 1 && rows >= kSplitRows) parallel_for(threads, rows, work);
    else work(0, rows);
  };
  if (!w.part.embedding) std::copy(batch.hidden, batch.hidden + rows * hidden, x.begin());
  by_rows([&](size_t first, size_t last) {
    for (size_t t = first; t < last; ++t) {
      if (w.part.embedding) {
        kernels::embedding_row(w.embedding.view(), size_t(batch.tokens[t]), &x[t * hidden]);
        if (c.embedding_scale != 1.0f)
          for (size_t i = t * hidden; i < (t + 1) * hidden; ++i) x[i] = x[i] * c.embedding_scale;
      }
      for (size_t b = 0; b < bases; ++b)
        kernels::rope_angles(&scratch.inv_freq[b * half], half, batch.positions[t], &cos[(b * rows + t) * half],
                             &sin[(b * rows + t) * half]);
    }
  });
  if (w.part.embedding) observe(0, {{"embedding", &x}});

  const float scale = ref::AttentionParams::inverse_sqrt_scale(c.query_pre_attn_scalar != 0.0 ? c.query_pre_attn_scalar
                                                                                               : double(c.head_dim));
  const auto activation = c.activation == ModelConfig::Activation::GeluTanh ? kernels::gelu_tanh_mul : kernels::silu_mul;
  const char* activation_name = c.activation == ModelConfig::Activation::GeluTanh ? "gelu_mul" : "silu_mul";
  // A block's output (`projected`), after its norm where the family has one (Gemma 3's post
  // norms), added to the residual stream x: rows first .. last - 1.
  const auto add_to_residual = [&](size_t first, size_t last, const std::vector<float>& post_norm) {
    float *x_rows = &x[first * hidden], *projected_rows = &projected[first * hidden];
    const size_t n = last - first;
    if (c.post_norms) kernels::rmsnorm(projected_rows, n, hidden, post_norm.data(), c.rms_norm_eps, projected_rows);
    for (size_t i = 0; i < n * hidden; ++i) x_rows[i] = x_rows[i] + projected_rows[i];
  };
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& layer = w.layers[i];
    const size_t l = w.part.first_layer + i;
    const size_t angles = c.layer_rope_theta(l) == c.rope_theta ? 0 : rows * half;
    by_rows([&](size_t first, size_t last) {
      kernels::rmsnorm(&x[first * hidden], last - first, hidden, layer.attention_norm.data(), c.rms_norm_eps,
                       &normed[first * hidden]);
    });
    kernels::matmuls(normed.data(), rows, {{{layer.q.view(), q.data()}, {layer.k.view(), k.data()}, {layer.v.view(), v.data()}}},
                     threads);
    by_rows([&](size_t first, size_t last) {
      float *q_rows = &q[first * q_width], *k_rows = &k[first * kv_width], *v_rows = &v[first * kv_width];
      if (c.qkv_bias) {
        kernels::add_bias(q_rows, last - first, q_width, layer.q_bias.data());
        kernels::add_bias(k_rows, last - first, kv_width, layer.k_bias.data());
        kernels::add_bias(v_rows, last - first, kv_width, layer.v_bias.data());
      }
      if (c.qk_norm) {
        kernels::rmsnorm(q_rows, (last - first) * c.heads, c.head_dim, layer.q_norm.data(), c.rms_norm_eps, q_rows);
        kernels::rmsnorm(k_rows, (last - first) * c.kv_heads, c.head_dim, layer.k_norm.data(), c.rms_norm_eps, k_rows);
      }
      for (size_t t = first; t < last; ++t) {
        const float *row_cos = &cos[angles + t * half], *row_sin = &sin[angles + t * half];
        kernels::rope(&q[t * q_width], c.heads, c.head_dim, row_cos, row_sin);
        kernels::rope(&k[t * kv_width], c.kv_heads, c.head_dim, row_cos, row_sin);
        kernels::write_kv(cache[i], batch.kv_slots[t].block, batch.kv_slots[t].slot, &k[t * kv_width],
                          &v[t * kv_width]);
      }
    });
    // Update, then fetch: attention reads this pass's keys and values back from the cache.
    kernels::attention(q.data(), batch.attention, cache[i], c.heads, {scale, c.window(l)}, attended.data(), threads);
    kernels::matmul(attended.data(), rows, layer.o.view(), projected.data(), threads);
    // q and k as attention read them: after their bias, norm (Qwen3) and RoPE.
    observe(l, {{"attn_norm", &normed}, {"q", &q}, {"k", &k}, {"v", &v}, {"attention", &attended}, {"o_proj", &projected}});
    by_rows([&](size_t first, size_t last) {
      add_to_residual(first, last, layer.post_attention_norm);
      kernels::rmsnorm(&x[first * hidden], last - first, hidden, layer.mlp_norm.data(), c.rms_norm_eps,
                       &normed[first * hidden]);
    });
    if (c.post_norms) observe(l, {{"post_attn_norm", &projected}});
    observe(l, {{"attn_residual", &x}});

    if (c.sparse(l)) {
      mixture_of_experts(c, layer, normed.data(), rows, projected.data(), threads, scratch);
      observe(l, {{"mlp_norm", &normed}, {"router", &scratch.router}, {"experts", &projected}});
    } else {
      kernels::matmuls(normed.data(), rows, {{{layer.gate.view(), gate.data()}, {layer.up.view(), up.data()}}}, threads);
      activation(gate.data(), up.data(), rows * c.intermediate_size, gate.data(), threads);
      kernels::matmul(gate.data(), rows, layer.down.view(), projected.data(), threads);
      observe(l, {{"mlp_norm", &normed}, {"up", &up}, {activation_name, &gate}, {"down", &projected}});
    }
    by_rows([&](size_t first, size_t last) { add_to_residual(first, last, layer.post_mlp_norm); });
    if (c.post_norms) observe(l, {{"post_mlp_norm", &projected}});
    observe(l, {{"mlp_residual", &x}});
  }

  if (!w.part.head || batch.logit_rows.empty()) return;
  for (size_t i = 0; i < batch.logit_rows.size(); ++i)
    kernels::rmsnorm(&x[batch.logit_rows[i] * hidden], 1, hidden, w.final_norm.data(), c.rms_norm_eps, &normed[i * hidden]);
  kernels::matmul(normed.data(), batch.logit_rows.size(), w.output_matrix(), logits, threads);
  if (c.final_logit_softcap != 0.0f) kernels::softcap(logits, batch.logit_rows.size() * c.vocab_size, c.final_logit_softcap);
}

}  // namespace ditto
