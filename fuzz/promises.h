#pragma once
// What the fuzz targets check of every value a parser accepts: the promises that the rest of
// ditto relies on without checking again.
#include <cstdio>
#include <cstdlib>

#include "ditto/model.h"
#include "tensor/limits.h"

namespace ditto::fuzz {

inline void check(bool promise, const char* what) {
  if (!promise) {
    std::fprintf(stderr, "broken promise: %s\n", what);
    std::abort();
  }
}

inline bool within(size_t value, Range range) { return value >= size_t(range.min) && value <= size_t(range.max); }

// A config from config.json or GGUF metadata: every number in its range (docs/limits.md), and the
// shape rules of the decoder (GQA, RoPE on whole heads).
inline void check_config(const ModelConfig& c) {
  check(within(c.vocab_size, limits::kVocabSize), "vocab_size in range");
  check(within(c.hidden_size, limits::kWidth) && within(c.intermediate_size, limits::kWidth), "widths in range");
  check(within(c.layers, limits::kLayers), "layers in range");
  check(within(c.heads, limits::kHeads) && within(c.kv_heads, limits::kHeads), "heads in range");
  check(within(c.head_dim, limits::kHeadDim) && c.head_dim % 2 == 0, "head_dim in range and even");
  check(c.heads % c.kv_heads == 0, "heads a multiple of kv_heads");
  check(within(c.max_positions, limits::kPositions), "max_positions in range");
  check(c.rms_norm_eps >= 0.0f && c.rms_norm_eps <= float(limits::kMaxRmsNormEps), "rms_norm_eps in range");
  check(c.rope_theta >= limits::kMinRopeTheta && c.rope_theta <= limits::kMaxRopeTheta, "rope_theta in range");
  check(c.bos_token_id >= -1 && c.bos_token_id <= limits::kTokenId.max, "bos_token_id a token id or none");
  check(c.eos_token_id >= -1 && c.eos_token_id <= limits::kTokenId.max, "eos_token_id a token id or none");
  check(c.sliding_windows.empty() || c.sliding_windows.size() == c.layers, "a window for every layer, or none");
  for (const size_t window : c.sliding_windows) check(window <= size_t(limits::kPositions.max), "windows in range");
  const ModelConfig::Llama3Rope& r = c.llama3_rope;
  check(r.factor == 0.0 || (r.factor >= 1.0 && r.high_freq_factor > r.low_freq_factor && r.low_freq_factor > 0.0 &&
                            r.original_max_positions >= 1.0),
        "llama3 rope scaling in range");
  check(c.experts == 0 || (within(c.experts, limits::kExperts) && c.experts_per_token >= 1 &&
                           c.experts_per_token <= c.experts && within(c.expert_intermediate_size, limits::kWidth) &&
                           c.sparse_layers.size() == c.layers),
        "experts in range, and experts per token at most the experts");
  check(c.rope_local_theta == 0.0 ||
            (c.rope_local_theta >= limits::kMinRopeTheta && c.rope_local_theta <= limits::kMaxRopeTheta),
        "rope_local_theta in range or none");
  check(c.query_pre_attn_scalar == 0.0 || (c.query_pre_attn_scalar >= limits::kMinQueryPreAttnScalar &&
                                           c.query_pre_attn_scalar <= limits::kMaxQueryPreAttnScalar),
        "query_pre_attn_scalar in range or none");
  check(c.final_logit_softcap == 0.0f || (c.final_logit_softcap >= float(limits::kMinSoftcap) &&
                                          c.final_logit_softcap <= float(limits::kMaxSoftcap)),
        "final_logit_softcap in range or none");
  check(c.embedding_scale > 0.0f && c.embedding_scale <= 1024.0f, "embedding_scale sqrt(hidden_size) or 1");
}

}  // namespace ditto::fuzz
