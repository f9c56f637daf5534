#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ditto {

// FNV-1a over the bytes of the logits: a short fingerprint that changes with any bit.
class LogitsHash {
 public:
  LogitsHash() = default;
  explicit LogitsHash(uint64_t state) : state_(state) {}  // continues a hash whose value() this was
  void update(const float* values, size_t count);
  uint64_t value() const { return state_; }
  std::string hex() const;  // hash_hex(value())

 private:
  uint64_t state_ = 0xcbf29ce484222325ull;
};

// A hash as 16 hex digits.
std::string hash_hex(uint64_t hash);

}  // namespace ditto
