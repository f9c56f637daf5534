#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "ditto/model.h"
#include "ditto/session.h"
#include "runtime/kv_cache.h"

namespace ditto {

// The buffers of one forward pass. A session keeps them, so that its calls reuse the memory
// instead of having the OS map and zero fresh pages every time.
struct DecoderScratch {
  std::vector<float> x, normed, projected, q, k, v, attended, gate, up, cos, sin;
};

// Runs `tokens` at positions first_pos, first_pos + 1, ... through the decoder: writes
// their keys and values into `cache`, attends over the cache, and stores the logits of the
// rows `which` asks for into `logits` (rows x vocab). Tokens and room are checked by the caller.
// An observer, if given, sees the intermediates of every layer.
void decoder_forward(const Model& model, KVCache& cache, std::span<const int32_t> tokens, size_t first_pos,
                     Logits which, float* logits, int threads, DecoderScratch& scratch,
                     ForwardObserver* observer = nullptr);

}  // namespace ditto
