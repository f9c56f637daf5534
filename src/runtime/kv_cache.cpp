#include "runtime/kv_cache.h"

namespace ditto {

KVCache::KVCache(size_t layers, size_t kv_heads, size_t head_dim, size_t capacity, DType dtype)
    : kv_heads_(kv_heads),
      head_dim_(head_dim),
      capacity_(capacity),
      dtype_(dtype),
      layer_elements_(kv_heads * capacity * head_dim),
      keys_(layers * layer_elements_ * dtype_size(dtype)),
      values_(layers * layer_elements_ * dtype_size(dtype)) {}

void KVCache::write(size_t layer, size_t position, const float* keys, const float* values) {
  for (size_t h = 0; h < kv_heads_; ++h) {
    const size_t at = layer * layer_elements_ + (h * capacity_ + position) * head_dim_;
    for (size_t d = 0; d < head_dim_; ++d) {
      store_from_f32(keys_.data(), dtype_, at + d, keys[h * head_dim_ + d]);
      store_from_f32(values_.data(), dtype_, at + d, values[h * head_dim_ + d]);
    }
  }
}

ref::KVLayerView KVCache::layer(size_t layer) const {
  const size_t offset = layer * layer_elements_ * dtype_size(dtype_);
  return {dtype_, capacity_, keys_.data() + offset, values_.data() + offset};
}

}  // namespace ditto
