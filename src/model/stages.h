#pragma once
// How a model is cut into pipeline stages (runtime/pipeline.h): contiguous layer ranges, the
// embedding on the first stage, the final norm and the logits on the last.
#include <string>
#include <vector>

#include "ditto/model.h"
#include "model/tensor_store.h"
#include "model/weights.h"

namespace ditto {

// The parts of `stages` stages with `layer_counts[s]` layers each (they must add up to the
// model's layers, each at least 1), or, given no counts, the split whose largest stage multiplies
// with the fewest weight bytes per row: a stage's layers' matrices (of a mixture of experts, the
// experts_per_token experts a row reads, not all it holds), and on the last stage the output
// projection. Throws ditto::Error for a split that does not fit the model.
std::vector<ModelPart> stage_parts(const TensorStore& store, const ModelConfig& config, size_t stages,
                                   const std::vector<size_t>& layer_counts = {});

// "first..last" of a part, e.g. "layers 0..13" (with "+ embedding", "+ logits" for the ends).
std::string part_text(const ModelPart& part);

}  // namespace ditto
