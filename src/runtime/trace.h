#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ditto/model.h"

namespace ditto {

// Records a hash (FNV-1a) of every row of every intermediate the decoder reports: one step per
// (layer, operation), in the order the decoder computes them, each with a hash per position.
class TraceRecorder : public ForwardObserver {
 public:
  struct Step {
    size_t layer = 0;
    std::string operation;
    std::vector<uint64_t> hashes;  // by position
  };

  void observe(size_t layer, std::string_view operation, std::span<const size_t> positions, const float* data,
               size_t width) override;
  const std::vector<Step>& steps() const { return steps_; }
  void clear();

 private:
  std::vector<Step> steps_;
  std::map<std::pair<size_t, std::string>, size_t, std::less<>> index_;
};

}  // namespace ditto
