#include "runtime/row_outputs.h"

#include <algorithm>

#include "ditto/error.h"
#include "tensor/hash.h"

namespace ditto {

RowResult RowOutputs::compute(std::span<const float> logits, const RowOutput& output, std::span<const int32_t> history,
                              uint64_t position, SequenceId sequence) {
  RowResult result;
  if (output.sampling) result.sampled = sampler_.sample(logits, history, *output.sampling, position);
  if (output.row_hash) {
    LogitsHash hash;
    hash.update(logits.data(), logits.size());
    result.row_hash = hash.value();
  }
  if (output.chain_hash) {
    const auto chain = chains_.try_emplace(sequence, output.chain_from).first;
    LogitsHash hash(chain->second);
    hash.update(logits.data(), logits.size());
    result.chain_hash = chain->second = hash.value();
  }
  return result;
}

ComputedRows compute_rows(RowOutputs& outputs, std::vector<float> logits, size_t vocab,
                          std::span<const RowInputs> rows) {
  ComputedRows computed;
  if (std::none_of(rows.begin(), rows.end(), [](const RowInputs& row) { return row.output; })) {
    computed.output.logits = std::move(logits);  // the logits alone: as they are
    return computed;
  }
  try {
    for (size_t r = 0; r < rows.size(); ++r) {
      const std::span<const float> row = std::span<const float>(logits).subspan(r * vocab, vocab);
      const RowOutput* output = rows[r].output;
      if (!output || output->logits) computed.output.logits.insert(computed.output.logits.end(), row.begin(), row.end());
      if (output)
        computed.output.results.push_back(
            outputs.compute(row, *output, rows[r].history, rows[r].position, rows[r].sequence));
    }
  } catch (const Error& e) {
    computed = {{}, e.what()};
  }
  return computed;
}

}  // namespace ditto
