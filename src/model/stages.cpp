#include "model/stages.h"

#include <algorithm>
#include <numeric>

#include "ditto/error.h"

namespace ditto {

namespace {

// The split of `bytes` (one entry per layer; `head` more on the last stage) into `stages`
// contiguous runs that makes the largest run smallest: cost[k][i] is the best largest run when
// the first i layers make k stages. Returns the layer count of each stage.
std::vector<size_t> balanced_counts(const std::vector<size_t>& bytes, size_t head, size_t stages) {
  const size_t layers = bytes.size();
  std::vector<size_t> prefix(layers + 1, 0);
  for (size_t i = 0; i < layers; ++i) prefix[i + 1] = prefix[i] + bytes[i];
  std::vector<std::vector<size_t>> cost(stages + 1, std::vector<size_t>(layers + 1, SIZE_MAX));
  std::vector<std::vector<size_t>> cut(stages + 1, std::vector<size_t>(layers + 1, 0));
  cost[0][0] = 0;
  for (size_t k = 1; k <= stages; ++k)
    for (size_t i = k; i <= layers; ++i)
      for (size_t j = k - 1; j < i; ++j) {
        if (cost[k - 1][j] == SIZE_MAX) continue;
        const size_t run = prefix[i] - prefix[j] + (k == stages && i == layers ? head : 0);
        const size_t worst = std::max(cost[k - 1][j], run);
        if (worst < cost[k][i]) cost[k][i] = worst, cut[k][i] = j;
      }
  std::vector<size_t> counts(stages);
  for (size_t k = stages, i = layers; k > 0; i = cut[k][i], --k) counts[k - 1] = i - cut[k][i];
  return counts;
}

}  // namespace

std::vector<ModelPart> stage_parts(const TensorStore& store, const ModelConfig& config, size_t stages,
                                   const std::vector<size_t>& layer_counts) {
  const size_t layers = config.layers;
  if (stages == 0 || stages > layers)
    throw Error(std::to_string(stages) + " stages for a model of " + std::to_string(layers) +
                " layers: give 1 to " + std::to_string(layers) + " (each stage holds at least one layer)");
  std::vector<size_t> counts = layer_counts;
  if (counts.empty()) {
    std::vector<size_t> bytes;
    for (size_t l = 0; l < layers; ++l) bytes.push_back(streamed_hf_weight_bytes(store, config, {l, l + 1, false, false}));
    const size_t head = streamed_hf_weight_bytes(store, config, {layers - 1, layers, false, true}) - bytes.back();
    counts = balanced_counts(bytes, head, stages);
  }
  if (counts.size() != stages)
    throw Error("--split gives " + std::to_string(counts.size()) + " layer counts for " + std::to_string(stages) + " stages");
  if (std::find(counts.begin(), counts.end(), size_t(0)) != counts.end() ||
      std::accumulate(counts.begin(), counts.end(), size_t(0)) != layers)
    throw Error("--split: the layer counts must be at least 1 each and add up to the model's " + std::to_string(layers) +
                " layers");
  std::vector<ModelPart> parts;
  size_t first = 0;
  for (size_t s = 0; s < stages; ++s) {
    parts.push_back({first, first + counts[s], s == 0, s + 1 == stages});
    first += counts[s];
  }
  return parts;
}

std::string part_text(const ModelPart& part) {
  return std::string(part.embedding ? "embedding + " : "") + "layers " + std::to_string(part.first_layer) + ".." +
         std::to_string(part.end_layer - 1) + (part.head ? " + logits" : "");
}

}  // namespace ditto
