#pragma once
// The outputs of a pass's logit rows (ditto/batch.h: RowOutput) from their logits, the same
// function wherever the logits are: in the engine of one process, on the last pipeline stage.
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ditto/batch.h"
#include "runtime/sampler.h"

namespace ditto {

class RowOutputs {
 public:
  // Before a pass's first row (its first micro-batch's, through stages): the running hashes
  // start again from the rows' chain_from.
  void begin_pass() { chains_.clear(); }
  // One row's result. `history` may be only the end of the sequence the penalties read, and
  // `position` is the token's. Throws ditto::Error if sampling fails.
  RowResult compute(std::span<const float> logits, const RowOutput& output, std::span<const int32_t> history,
                    uint64_t position, SequenceId sequence);

 private:
  Sampler sampler_;
  std::unordered_map<SequenceId, uint64_t> chains_;  // each sequence's running hash in this pass
};

// The results and logits of the rows of `output`, in order, that a pass computed the logits of
// (`logits`: rows x vocab); a row without an output returns its logits. A sampling error is
// returned (the first), not thrown, so that the caller can hand it on; the rest is then empty.
struct ComputedRows {
  PassOutput output;
  std::string error;
};
struct RowInputs {  // one logit row: what compute() needs
  const RowOutput* output;  // null: the logits alone
  std::span<const int32_t> history;
  uint64_t position;
  SequenceId sequence;
};
ComputedRows compute_rows(RowOutputs& outputs, std::vector<float> logits, size_t vocab,
                          std::span<const RowInputs> rows);

}  // namespace ditto
