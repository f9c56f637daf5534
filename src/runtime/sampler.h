#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "ditto/sampling.h"
#include "kernels/ref/kernels.h"

// The sampler: one token from one row of logits, reproducibly. The token is a pure function of
// the logits, the sequence's token history, the parameters and the position of the token
// drawn; its randomness is Philox4x32-10 keyed by the seed at counter (position, stream),
// never a generator whose state depends on what else ran. docs/sampling.md gives every step's
// arithmetic.
namespace ditto {

// The 64 random bits of the draw at `position`: words 0 and 1 (high, low) of
// Philox4x32-10(key = seed, counter = (position low, position high, stream 0, 0)).
uint64_t draw_bits(uint64_t seed, uint64_t position);

// Holds scratch buffers between calls so that a sequence's draws allocate nothing; keeps no
// state that changes a result. Not thread-safe: one per thread or sequence.
class Sampler {
 public:
  // The token at `position` (the index it will have in the sequence) given the logits of the
  // previous position; history is the sequence so far (prompt and generated tokens), for the
  // penalties. Throws ditto::Error for bad params, a non-finite logit, a history token in the
  // penalty window outside the vocabulary, or a missing seed.
  SampledToken sample(std::span<const float> logits, std::span<const int32_t> history,
                      const SamplingParams& params, uint64_t position);

 private:
  // A row of values (the logits, or z: the logits after penalties and bias) seen in blocks of
  // ref::kLogitsBlock ids: z shares the blocks it does not change with the logits.
  struct Row {
    std::vector<const float*> blocks;
    std::vector<float> maxima;
    size_t size = 0;
    float max = 0.0f;
    float value(uint32_t id) const { return blocks[id / ref::kLogitsBlock][id % ref::kLogitsBlock]; }
    size_t block_size(size_t block) const { return std::min(ref::kLogitsBlock, size - block * ref::kLogitsBlock); }
  };
  struct Candidate {
    uint64_t key;     // sort_key(z, id): the order (z desc, id asc)
    uint64_t weight;  // ref::sampling_weight
  };

  void penalize(std::span<const int32_t> history, const SamplingParams& params);
  int32_t draw(const Row& z, const SamplingParams& params, uint64_t position);
  uint64_t total_weight(const Row& row, float inverse_temperature);
  float kth_block_max(const Row& row, size_t k);
  void gather(const Row& row, float threshold, float below);
  void add_candidates(const Row& z, float inverse_temperature);
  void top_by_value(const Row& row, size_t count);
  uint64_t key_at(uint64_t target);
  int32_t draw_from_candidates(const Row& z, uint64_t bits);
  int32_t draw_from_whole_vocab(const Row& z, float inverse_temperature, uint64_t total, uint64_t bits);

  Row raw_, z_;
  std::vector<float> changed_;         // z's values in the blocks it changes
  std::vector<float> scratch_maxima_;  // for nth_element
  std::vector<uint64_t> block_sums_;   // sampling weights per block
  std::vector<uint32_t> counts_;       // occurrences in the penalty window (zero between calls)
  std::vector<uint32_t> tokens_;       // the tokens the penalties and bias change
  std::vector<uint32_t> ids_;          // indices_in_range output
  std::vector<uint64_t> keys_;         // gathered sort keys
  std::vector<float> values_;          // their values, for sampling_weights
  std::vector<uint64_t> weights_;      // and their weights
  std::vector<Candidate> candidates_;  // the tokens the draw chooses from
  std::vector<Candidate> bucket_;      // those in one bucket or block
};

// One call of a fresh Sampler.
SampledToken sample(std::span<const float> logits, std::span<const int32_t> history, const SamplingParams& params,
                    uint64_t position);

}  // namespace ditto
