#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "ditto/model.h"
#include "ditto/numerics.h"
#include "model/architecture.h"
#include "model/tensor_store.h"
#include "tensor/matrix.h"

namespace ditto {

// One expert of a mixture: gate, up: expert_intermediate x hidden; down: hidden x expert_intermediate.
struct ExpertWeights {
  PackedMatrix gate, up, down;
};

struct LayerWeights {
  std::vector<float> attention_norm;  // hidden
  PackedMatrix q, k, v, o;            // q: heads*head_dim x hidden, ..., o: hidden x heads*head_dim
  std::vector<float> q_bias, k_bias, v_bias;  // as wide as q, k, v; empty unless config.qkv_bias
  std::vector<float> q_norm, k_norm;  // head_dim each; empty unless config.qk_norm
  std::vector<float> post_attention_norm;  // hidden; empty unless config.post_norms
  std::vector<float> mlp_norm;        // hidden
  std::vector<float> post_mlp_norm;   // hidden; empty unless config.post_norms
  PackedMatrix gate, up, down;        // gate, up: intermediate x hidden; down: hidden x intermediate (dense layers)
  PackedMatrix router;                // experts x hidden (sparse layers, config.sparse(l))
  std::vector<ExpertWeights> experts;
};

// The part of the decoder a process holds: every layer, or the layers of one pipeline stage. The
// first stage holds the embedding, the last the final norm and the output projection (and the
// embedding too when the output is tied to it).
struct ModelPart {
  size_t first_layer = 0;
  size_t end_layer = SIZE_MAX;  // one past the last; SIZE_MAX: to the model's last layer
  bool embedding = true;        // the tokens' embeddings come in here
  bool head = true;             // the final norm and the logits come out here
};

struct ModelWeights {
  Numerics numerics = Numerics::Exact;  // of the quantised matrices; Exact when there are none
  ModelPart part;                     // end_layer set: the layers held are first_layer..end_layer-1
  PackedMatrix embedding;             // vocab x hidden; unset unless part.embedding or the head is tied to it
  std::vector<LayerWeights> layers;   // layers[i] is layer part.first_layer + i
  std::vector<float> final_norm;      // hidden; empty unless part.head
  PackedMatrix output;                // vocab x hidden; unset when tied to the embedding or without the head
  // llama.cpp's rope_freqs (GGUF files of Llama 3.1): RoPE's inverse frequency i is divided by
  // entry i (head_dim / 2 of them), on every stage. Empty: none.
  std::vector<float> rope_divisors;

  const MatrixView& output_matrix() const { return output.view().data ? output.view() : embedding.view(); }
};

// The numerics a model from this store runs with unless told otherwise: kQuantizedDefault if any
// of its tensors is quantised, else Exact.
Numerics default_numerics(const TensorStore& store);

// Checks that the store holds every tensor of the decoder that `config` describes (of `part`),
// each of the shape the config implies (ditto::Error naming the first that is missing or
// differs), and returns the memory packing them for `numerics` takes.
size_t check_hf_weights(const TensorStore& store, const ModelConfig& config, const ModelPart& part = {},
                        Numerics numerics = Numerics::Exact);
// Of those bytes, what a row streams: of a mixture of experts, experts_per_token experts' worth.
size_t streamed_hf_weight_bytes(const TensorStore& store, const ModelConfig& config, const ModelPart& part = {},
                                Numerics numerics = Numerics::Exact);

// How a file holds the decoder's tensors where it differs from transformers' modules (GGUF).
struct StoredLayout {
  QkLayout qk = QkLayout::Transformers;
  // With config.norm_adds_one: the norm weights hold 1 + w already, as llama.cpp's converter
  // writes them (convert_hf_to_gguf.py, for Gemma), rather than w.
  bool norms_hold_one_plus_w = false;
};

// The store's tensors that the decoder `config` describes does not read (a GGUF file may hold
// none: each would be something of the model left out of the computation).
std::vector<std::string> unread_tensors(const TensorStore& store, const ModelConfig& config);

// Takes the decoder's tensors from a Hugging Face checkpoint (names as transformers saves
// them), checks every shape against the config and the memory they take against the machine's
// before packing any, and packs them, q and k rows in transformers' order and norm weights as
// they act (1 + w where config.norm_adds_one) whatever `layout` the store holds, the quantised
// ones for `numerics` (default: default_numerics(store)).
std::unique_ptr<ModelWeights> pack_hf_weights(const TensorStore& store, const ModelConfig& config,
                                              StoredLayout layout = {}, const ModelPart& part = {},
                                              std::optional<Numerics> numerics = std::nullopt);

}  // namespace ditto
