#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ditto/numerics.h"

namespace ditto {

// The hyper-parameters of a decoder-only transformer, read from the checkpoint.
struct ModelConfig {
  std::string architecture_name;  // transformers' model_type (src/model/architecture.h)
  size_t vocab_size = 0;
  size_t hidden_size = 0;
  size_t intermediate_size = 0;
  size_t layers = 0;
  size_t heads = 0;
  size_t kv_heads = 0;
  size_t head_dim = 0;
  size_t max_positions = 0;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 10000.0;
  // Llama 3.1's RoPE scaling ("rope_type": "llama3"): low frequencies divided by `factor`, the
  // band between the two wavelengths interpolated. factor 0: plain RoPE.
  struct Llama3Rope {
    double factor = 0.0, low_freq_factor = 0.0, high_freq_factor = 0.0, original_max_positions = 0.0;
  } llama3_rope;
  // What the family's blocks do differently (set by its src/model/architectures/ file):
  bool qk_norm = false;           // an RMSNorm on each q and k head before RoPE (Qwen3, Gemma 3)
  bool qkv_bias = false;          // biases added after the q, k and v projections (Qwen2)
  bool tied_embeddings = false;   // the output projection is the embedding matrix
  // Per layer, how far back a row attends: 0 = to every earlier position, W = to the last W
  // positions, its own included (a sliding window: Mistral, Qwen2's upper layers, Gemma 3's
  // local layers). Empty when no layer has a window.
  std::vector<size_t> sliding_windows;
  // The RoPE base of the layers with a window, where it differs from rope_theta (Gemma 3's
  // rope_local_base_freq); 0: rope_theta.
  double rope_local_theta = 0.0;
  // A mixture of experts (Mixtral, Qwen3-MoE) in the layers marked in sparse_layers, a dense MLP
  // of intermediate_size in the others: a router picks experts_per_token of `experts` MLPs of
  // expert_intermediate_size for each row; their outputs are summed weighted by the router's
  // softmax, renormalised over the chosen ones if normalize_top_k. experts 0: dense everywhere.
  size_t experts = 0, experts_per_token = 0, expert_intermediate_size = 0;
  bool normalize_top_k = false;
  std::vector<bool> sparse_layers;
  // Gemma 3: RMSNorm weights act as 1 + w (config.json's checkpoints hold w); the attention and
  // MLP outputs are normalised too before their residual add; the MLP is GELU-tanh instead of
  // SiLU; the embedding row is multiplied by embedding_scale; scores are scaled by
  // query_pre_attn_scalar^-1/2; the logits are softcapped when final_logit_softcap > 0.
  bool norm_adds_one = false;
  bool post_norms = false;
  enum class Activation { SiLU, GeluTanh } activation = Activation::SiLU;
  float embedding_scale = 1.0f;
  double query_pre_attn_scalar = 0.0;  // 0: head_dim
  float final_logit_softcap = 0.0f;    // 0: none
  int64_t bos_token_id = -1;      // -1: none
  int64_t eos_token_id = -1;

  size_t window(size_t layer) const { return layer < sliding_windows.size() ? sliding_windows[layer] : 0; }
  bool sparse(size_t layer) const { return layer < sparse_layers.size() && sparse_layers[layer]; }
  double layer_rope_theta(size_t layer) const {
    return window(layer) != 0 && rope_local_theta != 0.0 ? rope_local_theta : rope_theta;
  }
};

struct ModelWeights;  // defined in src/model/weights.h

// A loaded model: config and packed weights, immutable and shared by sessions.
class Model {
 public:
  // Loads a GGUF file, or a Hugging Face checkpoint directory (config.json and
  // model.safetensors, or the shards named by model.safetensors.index.json). Throws
  // ditto::Error on bad input. Quantised matrices are packed for `numerics` (default: the
  // file's, LoadOptions).
  static std::shared_ptr<const Model> load(const std::string& path, std::optional<Numerics> numerics = std::nullopt);

  Model(ModelConfig config, std::unique_ptr<ModelWeights> weights);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return *weights_; }
  size_t parameter_count() const;
  // Bytes of weights one decode step streams: every matrix it holds once, as packed (the
  // embedding only as the tied output projection; the one row looked up is negligible), of a
  // mixture of experts the router and experts_per_token experts' worth.
  size_t streamed_weight_bytes() const;
  // Floating-point operations (a multiply-add counts two) to compute one position that attends
  // to `context` keys (at most its window in a windowed layer; the experts it is routed to in a
  // mixture), with the output projection counted for a share `logit_share` of positions.
  double flops_per_position(double context, double logit_share) const;
  // The type of the layers' matrices, e.g. "bf16" or "q4_1".
  std::string weight_type() const;
  // How its quantised matrices multiply: Exact when it has none.
  Numerics numerics() const;

 private:
  ModelConfig config_;
  std::unique_ptr<ModelWeights> weights_;
};

// Sees the intermediates of every forward pass (for `ditto verify --trace`). Optional: a
// forward pass without one pays nothing.
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  // `operation` of `layer` produced `positions.size()` rows of `width` floats, row t for
  // position positions[t] of its sequence. Called in the order the decoder computes them.
  virtual void observe(size_t layer, std::string_view operation, std::span<const size_t> positions, const float* data,
                       size_t width) = 0;
};

}  // namespace ditto
