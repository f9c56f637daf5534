#pragma once
#include <vector>

#include "ditto/dtype.h"
#include "kernels/ref/kernels.h"

namespace ditto {

// Keys and values of every layer, stored at the cache's own precision. Layout per layer:
// [kv_head][position][head_dim], so that one head's keys are contiguous.
class KVCache {
 public:
  KVCache(size_t layers, size_t kv_heads, size_t head_dim, size_t capacity, DType dtype);

  // Rounds one position's keys and values (kv_heads * head_dim each) to the cache dtype
  // and stores them.
  void write(size_t layer, size_t position, const float* keys, const float* values);
  ref::KVLayerView layer(size_t layer) const;
  size_t capacity() const { return capacity_; }

 private:
  size_t kv_heads_, head_dim_, capacity_;
  DType dtype_;
  size_t layer_elements_;
  std::vector<unsigned char> keys_, values_;
};

}  // namespace ditto
