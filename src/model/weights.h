#pragma once
#include <vector>

#include "ditto/model.h"
#include "model/architecture.h"
#include "model/tensor_store.h"
#include "tensor/matrix.h"

namespace ditto {

struct LayerWeights {
  std::vector<float> attention_norm;  // hidden
  PackedMatrix q, k, v, o;            // q: heads*head_dim x hidden, ..., o: hidden x heads*head_dim
  std::vector<float> q_norm, k_norm;  // head_dim each; empty unless config.qk_norm
  std::vector<float> post_attention_norm;  // hidden; empty unless config.post_norms
  std::vector<float> mlp_norm;        // hidden
  std::vector<float> post_mlp_norm;   // hidden; empty unless config.post_norms
  PackedMatrix gate, up, down;        // gate, up: intermediate x hidden; down: hidden x intermediate
};

struct ModelWeights {
  PackedMatrix embedding;             // vocab x hidden
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;      // hidden
  PackedMatrix output;                // vocab x hidden; unset when tied to the embedding

  const MatrixView& output_matrix() const { return output.view().data ? output.view() : embedding.view(); }
};

// Checks that the store holds every tensor of the decoder that `config` describes, each of the
// shape the config implies (ditto::Error naming the first that is missing or differs), and
// returns the memory packing them takes.
size_t check_hf_weights(const TensorStore& store, const ModelConfig& config);

// How a file holds the decoder's tensors where it differs from transformers' modules (GGUF).
struct StoredLayout {
  QkLayout qk = QkLayout::Transformers;
  // With config.norm_adds_one: the norm weights hold 1 + w already, as llama.cpp's converter
  // writes them (convert_hf_to_gguf.py, for Gemma), rather than w.
  bool norms_hold_one_plus_w = false;
};

// Takes the decoder's tensors from a Hugging Face checkpoint (names as transformers saves
// them), checks every shape against the config and the memory they take against the machine's
// before packing any, and packs them, q and k rows in transformers' order and norm weights as
// they act (1 + w where config.norm_adds_one) whatever `layout` the store holds.
std::unique_ptr<ModelWeights> pack_hf_weights(const TensorStore& store, const ModelConfig& config,
                                              StoredLayout layout = {});

}  // namespace ditto
