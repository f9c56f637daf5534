#include "runtime/trace.h"

#include "tensor/hash.h"

namespace ditto {

void TraceRecorder::observe(size_t layer, std::string_view operation, std::span<const size_t> positions,
                            const float* data, size_t width) {
  auto [it, added] = index_.try_emplace({layer, std::string(operation)}, steps_.size());
  if (added) steps_.push_back(Step{layer, std::string(operation), {}});
  std::vector<uint64_t>& hashes = steps_[it->second].hashes;
  for (size_t t = 0; t < positions.size(); ++t) {
    if (hashes.size() <= positions[t]) hashes.resize(positions[t] + 1);
    LogitsHash hash;
    hash.update(data + t * width, width);
    hashes[positions[t]] = hash.value();
  }
}

void TraceRecorder::clear() {
  steps_.clear();
  index_.clear();
}

}  // namespace ditto
