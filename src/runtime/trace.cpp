#include "runtime/trace.h"

#include "tensor/hash.h"

namespace ditto {

void TraceRecorder::observe(size_t layer, std::string_view operation, size_t first_pos, const float* data, size_t rows,
                            size_t width) {
  auto [it, added] = index_.try_emplace({layer, std::string(operation)}, steps_.size());
  if (added) steps_.push_back(Step{layer, std::string(operation), {}});
  std::vector<uint64_t>& hashes = steps_[it->second].hashes;
  if (hashes.size() < first_pos + rows) hashes.resize(first_pos + rows);
  for (size_t t = 0; t < rows; ++t) {
    LogitsHash hash;
    hash.update(data + t * width, width);
    hashes[first_pos + t] = hash.value();
  }
}

void TraceRecorder::clear() {
  steps_.clear();
  index_.clear();
}

}  // namespace ditto
