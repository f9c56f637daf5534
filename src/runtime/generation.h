#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "ditto/session.h"

namespace ditto {

struct GenerationOptions {
  size_t chunk = 0;                 // prefill chunk size; 0 = the whole prompt in one call
  size_t max_tokens = 32;
  bool stop_at_eos = true;
  bool all_prompt_logits = false;   // compute (and hash) the logits of every prompt position
};

struct Generation {
  std::vector<int32_t> ids;
  std::vector<uint64_t> step_hashes;  // step_hashes[i]: FNV-1a of the logits that chose ids[i]
  uint64_t logits_hash = 0;           // FNV-1a of every logits row computed, in order
  bool context_full = false;          // stopped before max_tokens: no room in the cache
  double prefill_seconds = 0, decode_seconds = 0;
};

// Greedy continuation: prefills `prompt` into the session in chunks, then decodes token by token.
// on_token, if given, sees each token as soon as it is chosen.
Generation generate_greedy(Session& session, std::span<const int32_t> prompt, const GenerationOptions& options,
                           const std::function<void(int32_t)>& on_token = {});

}  // namespace ditto
