#include "runtime/sampler.h"

#include <Random123/philox.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "ditto/error.h"
#include "kernels/kernels.h"
#include "kernels/ref/math.h"

namespace ditto {

namespace {

// Philox counter word 2: which use of the seed's randomness. 0 is the token draw; other uses
// (none yet) take other streams, so that they never share random numbers with it.
constexpr uint32_t kTokenDrawStream = 0;

// The vocabulary must stay below 2^20 tokens so that the sum of all integer weights (each at
// most 2^44) fits in 64 bits.
constexpr size_t kMaxVocab = size_t(1) << (64 - ref::kWeightBits);

[[noreturn]] void fail(const std::string& what) { throw Error("sampling: " + what); }

std::string str(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// ceil(fraction * total), exactly, for fraction in (0, 1]: fraction = m * 2^(e - 53) with an
// integer m < 2^53 (frexp and ldexp are exact), so the product is a 128-bit integer shifted.
uint64_t ceil_fraction(double fraction, uint64_t total) {
  int exponent;
  const uint64_t mantissa = uint64_t(std::ldexp(std::frexp(fraction, &exponent), 53));
  const unsigned __int128 product = (unsigned __int128)mantissa * total;
  const int shift = 53 - exponent;
  if (shift >= 128) return product != 0;
  const unsigned __int128 quotient = product >> shift;
  return uint64_t(quotient + ((quotient << shift) != product));
}

// The order (value desc, id asc) as an unsigned integer order: the value's bits mapped to an
// increasing integer (+0 for -0, which equals it), complemented, above the id.
uint64_t sort_key(float value, uint32_t id) {
  uint32_t bits;
  const float normalized = value + 0.0f;
  std::memcpy(&bits, &normalized, 4);
  const uint32_t increasing = bits ^ (uint32_t(int32_t(bits) >> 31) | 0x80000000u);
  return (uint64_t(~increasing) << 32) | id;
}

// The value of a sort key (+0 for -0).
float value_of(uint64_t key) {
  const uint32_t increasing = ~uint32_t(key >> 32);
  const uint32_t bits = increasing ^ (increasing & 0x80000000u ? 0x80000000u : 0xFFFFFFFFu);
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

uint32_t id_of(uint64_t key) { return uint32_t(key); }

// The element at `target` in the order of the unique integers order(element): the c with
// (weight of the elements before c) <= target < (that weight + c.weight), for target below the
// range's total weight. A quickselect: no sort, and the range is reordered.
template <typename It, typename Order>
It weighted_select(It first, It last, uint64_t target, Order order) {
  for (;;) {
    const uint64_t a = order(*first), b = order(first[(last - first) / 2]), c = order(last[-1]);
    const uint64_t pivot = std::max(std::min(a, b), std::min(std::max(a, b), c));  // the median
    const It split = std::partition(first, last, [&](const auto& e) { return order(e) < pivot; });
    uint64_t before = 0;
    for (It e = first; e != split; ++e) before += e->weight;
    if (target < before) {
      last = split;
      continue;
    }
    target -= before;
    std::iter_swap(split, std::find_if(split, last, [&](const auto& e) { return order(e) == pivot; }));
    if (target < split->weight) return split;
    target -= split->weight;
    first = split + 1;
  }
}

// floor(bits / 2^64 * total): the draw's target in [0, total), exact.
uint64_t scale_bits(uint64_t bits, uint64_t total) {
  return uint64_t(((unsigned __int128)bits * total) >> 64);
}

}  // namespace

std::span<const int32_t> SamplingParams::penalty_window_of(std::span<const int32_t> history) const {
  if (!penalized()) return {};
  return history.last(penalty_window == 0 ? history.size() : std::min(history.size(), size_t(penalty_window)));
}

void SamplingParams::validate(size_t vocab) const {
  if (!(temperature >= 0.0 && std::isfinite(temperature)))
    fail("temperature must be a finite number >= 0, got " + str(temperature));
  if (top_k < 0) fail("top_k must be >= 0 (0: off), got " + std::to_string(top_k));
  if (!(top_p > 0.0 && top_p <= 1.0)) fail("top_p must be in (0, 1], got " + str(top_p));
  if (!(min_p >= 0.0 && min_p <= 1.0)) fail("min_p must be in [0, 1], got " + str(min_p));
  if (!(repetition_penalty > 0.0 && std::isfinite(repetition_penalty)))
    fail("repetition_penalty must be a finite number > 0, got " + str(repetition_penalty));
  if (!std::isfinite(presence_penalty)) fail("presence_penalty must be finite, got " + str(presence_penalty));
  if (!std::isfinite(frequency_penalty)) fail("frequency_penalty must be finite, got " + str(frequency_penalty));
  if (penalty_window < 0) fail("penalty_window must be >= 0 (0: the whole history), got " + std::to_string(penalty_window));
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || size_t(token) >= vocab)
      fail("logit_bias token " + std::to_string(token) + " is outside the vocabulary of " + std::to_string(vocab));
    if (!std::isfinite(bias)) fail("logit_bias of token " + std::to_string(token) + " must be finite, got " + str(bias));
  }
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs)
    fail("top_logprobs must be in [0, " + std::to_string(kMaxTopLogprobs) + "], got " + std::to_string(top_logprobs));
  if (top_logprobs > 0 && !logprobs) fail("top_logprobs needs logprobs");
  if (!greedy() && !seed) fail("a seed is needed to sample (temperature > 0); with_seed() draws one");
}

SamplingParams with_seed(SamplingParams params) {
  if (!params.seed) {
    std::random_device device;
    params.seed = (uint64_t(device()) << 32) | device();
  }
  return params;
}

uint64_t draw_bits(uint64_t seed, uint64_t position) {
  using Philox = r123::Philox4x32_R<10>;
  const Philox::ctr_type counter = {{uint32_t(position), uint32_t(position >> 32), kTokenDrawStream, 0}};
  const Philox::key_type key = {{uint32_t(seed), uint32_t(seed >> 32)}};
  const Philox::ctr_type out = Philox()(counter, key);
  return (uint64_t(out[0]) << 32) | out[1];
}

SampledToken Sampler::sample(std::span<const float> logits, std::span<const int32_t> history,
                             const SamplingParams& params, uint64_t position) {
  const size_t vocab = logits.size();
  if (vocab == 0 || vocab >= kMaxVocab)
    fail("the logits must have 1 to " + std::to_string(kMaxVocab - 1) + " entries, got " + std::to_string(vocab));
  params.validate(vocab);
  const size_t blocks = (vocab + ref::kLogitsBlock - 1) / ref::kLogitsBlock;
  raw_.size = vocab;
  raw_.blocks.resize(blocks);
  raw_.maxima.resize(blocks);
  for (size_t block = 0; block < blocks; ++block) raw_.blocks[block] = logits.data() + block * ref::kLogitsBlock;
  raw_.max = kernels::block_max(logits.data(), vocab, raw_.maxima.data());
  if (std::isnan(raw_.max)) {
    const auto bad = std::find_if(logits.begin(), logits.end(), [](float x) { return !std::isfinite(x); });
    fail("logit " + std::to_string(bad - logits.begin()) + " is " + str(*bad) + ": the logits must be finite");
  }
  penalize(history, params);

  SampledToken result;
  if (params.greedy()) {
    const size_t block = size_t(std::find(z_.maxima.begin(), z_.maxima.end(), z_.max) - z_.maxima.begin());
    result.token = int32_t(block * ref::kLogitsBlock +
                           kernels::first_index_of(z_.blocks[block], z_.block_size(block), z_.max));
  } else {
    result.token = draw(z_, params, position);
  }
  if (params.logprobs) {
    // log_softmax of the raw logits: l - max - log(sum of exp(l - max)), the sum being the
    // exact sum of the integer weights at temperature 1, scaled back by 2^-44.
    const double log_total = ref::log_f64(std::ldexp(double(total_weight(raw_, 1.0f)), -ref::kWeightBits));
    const auto logprob = [&](uint32_t token) { return float((double(logits[token]) - double(raw_.max)) - log_total); };
    result.logprob = logprob(uint32_t(result.token));
    if (params.top_logprobs > 0) {
      top_by_value(raw_, std::min<size_t>(params.top_logprobs, vocab));
      for (const uint64_t key : keys_) result.top.push_back({int32_t(id_of(key)), logprob(id_of(key))});
    }
  }
  return result;
}

// z_ = the logits after the penalties and the logit bias. The blocks they change are copied
// and changed; the others, and their maxima, are the logits'.
void Sampler::penalize(std::span<const int32_t> history, const SamplingParams& params) {
  z_.size = raw_.size;
  z_.max = raw_.max;
  z_.blocks = raw_.blocks;
  z_.maxima = raw_.maxima;
  const bool penalties = params.penalized();
  if (!penalties && params.logit_bias.empty()) return;

  tokens_.clear();
  if (penalties) {
    counts_.resize(raw_.size);  // all zero: every call puts back the zeros it changed
    for (const int32_t token : params.penalty_window_of(history)) {
      if (token < 0 || size_t(token) >= raw_.size) {
        for (const uint32_t counted : tokens_) counts_[counted] = 0;
        fail("history token " + std::to_string(token) + " is outside the vocabulary of " + std::to_string(raw_.size));
      }
      if (counts_[token]++ == 0) tokens_.push_back(uint32_t(token));
    }
  }
  for (const auto& [token, bias] : params.logit_bias) tokens_.push_back(uint32_t(token));

  // Copy each changed block once, then change its values there.
  std::vector<uint32_t>& changed_blocks = ids_;
  changed_blocks.clear();
  for (const uint32_t token : tokens_) changed_blocks.push_back(uint32_t(token / ref::kLogitsBlock));
  std::sort(changed_blocks.begin(), changed_blocks.end());
  changed_blocks.erase(std::unique(changed_blocks.begin(), changed_blocks.end()), changed_blocks.end());
  changed_.resize(changed_blocks.size() * ref::kLogitsBlock);
  for (size_t i = 0; i < changed_blocks.size(); ++i) {
    const size_t block = changed_blocks[i];
    std::copy_n(raw_.blocks[block], raw_.block_size(block), &changed_[i * ref::kLogitsBlock]);
    z_.blocks[block] = &changed_[i * ref::kLogitsBlock];
  }
  const auto at = [&](uint32_t token) -> float& {
    const auto block = std::lower_bound(changed_blocks.begin(), changed_blocks.end(), token / ref::kLogitsBlock);
    return changed_[size_t(block - changed_blocks.begin()) * ref::kLogitsBlock + token % ref::kLogitsBlock];
  };
  if (penalties) {
    const float repetition = float(params.repetition_penalty);
    const float presence = float(params.presence_penalty), frequency = float(params.frequency_penalty);
    for (const uint32_t token : tokens_) {
      if (counts_[token] == 0) continue;  // a logit_bias entry
      float& value = at(token);
      value = value > 0.0f ? value / repetition : value * repetition;
      value = value - (float(counts_[token]) * frequency + presence);
      counts_[token] = 0;
    }
  }
  for (const auto& [token, bias] : params.logit_bias) at(uint32_t(token)) = at(uint32_t(token)) + float(bias);

  for (size_t i = 0; i < changed_blocks.size(); ++i) {
    const size_t block = changed_blocks[i];
    if (std::isnan(kernels::block_max(&changed_[i * ref::kLogitsBlock], z_.block_size(block), &z_.maxima[block])))
      fail("the penalties and logit bias made a logit infinite");
  }
  z_.max = *std::max_element(z_.maxima.begin(), z_.maxima.end());
}

// The order of the candidates is (z desc, id asc); top-k, top-p and min-p each keep a head of
// it, and the draw walks the shortest of those heads by id.
int32_t Sampler::draw(const Row& z, const SamplingParams& params, uint64_t position) {
  const float inverse_temperature = 1.0f / float(params.temperature);
  if (!std::isfinite(inverse_temperature)) fail("temperature " + str(params.temperature) + " is too small");
  const uint64_t bits = draw_bits(*params.seed, position);
  const size_t k = params.top_k == 0 ? z.size : std::min(size_t(params.top_k), z.size);
  const bool top_p = params.top_p < 1.0, min_p = params.min_p > 0.0;
  if (k == z.size && !top_p && !min_p)
    return draw_from_whole_vocab(z, inverse_temperature, total_weight(z, inverse_temperature), bits);

  keys_.clear();
  candidates_.clear();
  uint64_t needed = 0, mass = 0;
  // min-p keeps x >= log(min_p), x being the scaled logit: p >= min_p * p_max.
  const float min_x = min_p ? float(ref::log_f64(params.min_p)) : -std::numeric_limits<float>::infinity();
  if (k < z.size) {
    gather(z, kth_block_max(z, k), std::numeric_limits<float>::infinity());
    std::nth_element(keys_.begin(), keys_.begin() + std::ptrdiff_t(k - 1), keys_.end());
    keys_.resize(k);
    add_candidates(z, inverse_temperature);
    for (const Candidate& c : candidates_) mass += c.weight;
    if (top_p) needed = ceil_fraction(params.top_p, mass);
  } else {
    // Gather the head band by band until it holds the top-p head or reaches the min-p limit.
    // The bands lie between thresholds: the count-th largest block maxima for count = 16, 64,
    // ... (the head then holds at least count ids), then z.max + x * T for x in kBandSteps
    // (every id of positive weight has x above -31), then -inf.
    if (top_p) needed = ceil_fraction(params.top_p, total_weight(z, inverse_temperature));
    const float temperature = float(params.temperature);
    float above = std::numeric_limits<float>::infinity();
    static constexpr int kBandSteps[] = {-2, -4, -6, -8, -10, -12, -16, -20, -24, -32};
    size_t count = 16, step = 0;
    for (;;) {
      float threshold = -std::numeric_limits<float>::infinity();
      if (count < z.maxima.size()) {
        threshold = kth_block_max(z, count);
        count *= 4;
      } else if (step < std::size(kBandSteps)) {
        threshold = z.max + float(kBandSteps[step++]) * temperature;
      }
      if (!(threshold < above)) continue;
      const size_t start = candidates_.size();
      keys_.clear();
      gather(z, threshold, above);
      add_candidates(z, inverse_temperature);
      for (size_t i = start; i < candidates_.size(); ++i) mass += candidates_[i].weight;
      if (threshold == -std::numeric_limits<float>::infinity() || (top_p && mass >= needed) ||
          (min_p && ref::scaled_logit(threshold, z.max, inverse_temperature) < min_x))
        break;
      above = threshold;
    }
  }
  // The top-p head ends at the candidate whose mass reaches `needed`, when it is in.
  const uint64_t last_key = top_p && mass >= needed ? key_at(needed - 1) : ~uint64_t(0);
  std::erase_if(candidates_, [&](const Candidate& c) {
    return c.key > last_key || ref::scaled_logit(z.value(id_of(c.key)), z.max, inverse_temperature) < min_x;
  });
  return draw_from_candidates(z, bits);
}

// The sum of the sampling weights of a row, and of each block in block_sums_. Blocks whose
// maximum has a scaled logit below ref::kNoWeightBelow weigh 0 without being read.
uint64_t Sampler::total_weight(const Row& row, float inverse_temperature) {
  block_sums_.resize(row.maxima.size());
  uint64_t total = 0;
  for (size_t block = 0; block < row.maxima.size(); ++block) {
    block_sums_[block] =
        ref::scaled_logit(row.maxima[block], row.max, inverse_temperature) < ref::kNoWeightBelow
            ? 0
            : kernels::sum_of_weights(row.blocks[block], row.block_size(block), row.max, inverse_temperature);
    total += block_sums_[block];
  }
  return total;
}

// The k-th largest block maximum (k >= 1): at least k ids have a value at or above it.
// -inf when k reaches the number of blocks: every id.
float Sampler::kth_block_max(const Row& row, size_t k) {
  if (k >= row.maxima.size()) return -std::numeric_limits<float>::infinity();
  scratch_maxima_.assign(row.maxima.begin(), row.maxima.end());
  std::nth_element(scratch_maxima_.begin(), scratch_maxima_.begin() + std::ptrdiff_t(k - 1), scratch_maxima_.end(),
                   std::greater<>());
  return scratch_maxima_[k - 1];
}

// Appends to keys_ the sort keys of the ids with threshold <= value < below, reading only the
// blocks whose maximum reaches the threshold.
void Sampler::gather(const Row& row, float threshold, float below) {
  ids_.resize(ref::kLogitsBlock);
  for (size_t block = 0; block < row.maxima.size(); ++block) {
    if (row.maxima[block] < threshold) continue;
    const float* values = row.blocks[block];
    const size_t count = kernels::indices_in_range(values, row.block_size(block), threshold, below, ids_.data());
    for (size_t i = 0; i < count; ++i)
      keys_.push_back(sort_key(values[ids_[i]], uint32_t(block * ref::kLogitsBlock + ids_[i])));
  }
}

// Appends the ids of keys_ with their weights to candidates_.
void Sampler::add_candidates(const Row& z, float inverse_temperature) {
  values_.resize(keys_.size());
  weights_.resize(keys_.size());
  for (size_t i = 0; i < keys_.size(); ++i) values_[i] = z.value(id_of(keys_[i]));
  kernels::sampling_weights(values_.data(), values_.size(), z.max, inverse_temperature, weights_.data());
  for (size_t i = 0; i < keys_.size(); ++i) candidates_.push_back({keys_[i], weights_[i]});
}

// keys_ = the `count` ids with the largest values, by (value desc, id asc).
void Sampler::top_by_value(const Row& row, size_t count) {
  keys_.clear();
  gather(row, kth_block_max(row, count), std::numeric_limits<float>::infinity());
  std::partial_sort(keys_.begin(), keys_.begin() + std::ptrdiff_t(count), keys_.end());
  keys_.resize(count);
}

// The key of the candidate at `target` (below their total weight) in the order of the keys.
// One pass sums the weights in 64 buckets, equal slices of the candidates' range of values (a
// bucket's keys all come before the next bucket's); a quickselect finds the target in its bucket.
uint64_t Sampler::key_at(uint64_t target) {
  float lowest = value_of(candidates_[0].key), highest = lowest;
  for (const Candidate& c : candidates_) {
    lowest = std::min(lowest, value_of(c.key));
    highest = std::max(highest, value_of(c.key));
  }
  // f32 arithmetic that never reverses an order: the bucket does not decrease along the keys.
  const float scale = highest > lowest ? 63.0f / (highest - lowest) : 0.0f;
  const auto bucket = [&](const Candidate& c) {
    return std::min(63u, uint32_t((highest - value_of(c.key)) * scale));
  };
  uint64_t sums[64] = {};
  for (const Candidate& c : candidates_) sums[bucket(c)] += c.weight;
  uint32_t chosen = 0;
  while (target >= sums[chosen]) target -= sums[chosen++];
  bucket_.clear();
  for (const Candidate& c : candidates_)
    if (bucket(c) == chosen) bucket_.push_back(c);
  return weighted_select(bucket_.begin(), bucket_.end(), target, [](const Candidate& c) { return c.key; })->key;
}

// The draw: the candidate at floor(bits / 2^64 * total weight) in id order. The weights summed
// per block of ids find the block; sorting the block's few candidates by id, the token.
int32_t Sampler::draw_from_candidates(const Row& z, uint64_t bits) {
  block_sums_.assign(z.maxima.size(), 0);
  uint64_t total = 0;
  for (const Candidate& c : candidates_) {
    block_sums_[id_of(c.key) / ref::kLogitsBlock] += c.weight;
    total += c.weight;
  }
  uint64_t target = scale_bits(bits, total);
  size_t block = 0;
  while (target >= block_sums_[block]) target -= block_sums_[block++];
  bucket_.clear();
  for (const Candidate& c : candidates_)
    if (id_of(c.key) / ref::kLogitsBlock == block) bucket_.push_back(c);
  std::sort(bucket_.begin(), bucket_.end(), [](const Candidate& a, const Candidate& b) { return id_of(a.key) < id_of(b.key); });
  auto chosen = bucket_.begin();
  while (target >= chosen->weight) target -= (chosen++)->weight;
  return int32_t(id_of(chosen->key));
}

// Walks the whole vocabulary by id: the block sums of total_weight find the block, then the
// block's weights the token.
int32_t Sampler::draw_from_whole_vocab(const Row& z, float inverse_temperature, uint64_t total, uint64_t bits) {
  uint64_t target = scale_bits(bits, total);
  size_t block = 0;
  while (target >= block_sums_[block]) target -= block_sums_[block++];
  weights_.resize(ref::kLogitsBlock);
  kernels::sampling_weights(z.blocks[block], z.block_size(block), z.max, inverse_temperature, weights_.data());
  size_t i = 0;
  while (target >= weights_[i]) target -= weights_[i++];
  return int32_t(block * ref::kLogitsBlock + i);
}

SampledToken sample(std::span<const float> logits, std::span<const int32_t> history, const SamplingParams& params,
                    uint64_t position) {
  return Sampler().sample(logits, history, params, position);
}

}  // namespace ditto
