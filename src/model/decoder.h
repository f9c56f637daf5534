#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "ditto/model.h"
#include "kernels/ref/kernels.h"

namespace ditto {

// The buffers of one forward pass. The caller keeps them, so that its calls reuse the memory
// instead of having the OS map and zero fresh pages every time.
struct DecoderScratch {
  std::vector<float> x, normed, projected, q, k, v, attended, gate, up, cos, sin;
  // A mixture of experts: router logits, the chosen experts' weights and indices (per row), and
  // an expert's rows gathered, its gate and up, and its output.
  std::vector<float> router, route_weights, expert_in, expert_gate, expert_up, expert_out;
  std::vector<uint32_t> route_experts;
  std::vector<float> inv_freq;  // RoPE's, head_dim / 2
};

// Where a row's keys and values go in the paged cache.
struct KVSlot {
  uint32_t block;
  uint32_t slot;
};

// The rows of one forward pass. Rows may come from different sequences: each carries its
// token, its position, the cache slot its keys and values are written to and, for attention,
// its sequence's block table. Nothing a row computes depends on the other rows.
struct ForwardRows {
  std::span<const int32_t> tokens;
  std::span<const size_t> positions;
  std::span<const KVSlot> kv_slots;
  std::span<const ref::AttentionRow> attention;  // blocks of the row's sequence; position as above
  std::span<const size_t> logit_rows;            // rows whose logits are wanted, in this order
  // rows x hidden: the input of the first layer, for a model that holds a later stage's layers
  // (no embedding); tokens are then unused.
  const float* hidden = nullptr;
};

// The memory decoder_forward's scratch takes for a pass of `rows` rows; throws ditto::Error if it
// overflows.
size_t decoder_scratch_bytes(const ModelConfig& config, size_t rows);

// Runs the rows through the decoder: writes their keys and values into the cache (one view
// per layer), attends over the cache, and stores the logits of logit_rows into `logits`
// (logit_rows.size() x vocab). Tokens, positions and cache room are checked by the caller.
// An observer, if given, sees the intermediates of every layer.
//
// A model that holds one pipeline stage's part (ModelWeights::part) runs its layers only, cache
// view i for its layer i: from the embedding of the tokens if it holds the embedding, else from
// rows.hidden; to the logits if it holds the head, else it leaves the hidden state of every row
// in scratch.x for the next stage.
void decoder_forward(const Model& model, std::span<const ref::KVLayerView> cache, const ForwardRows& rows,
                     float* logits, int threads, DecoderScratch& scratch, ForwardObserver* observer = nullptr);

}  // namespace ditto
