#include "tensor/hash.h"

#include <cstdio>
#include <cstring>

namespace ditto {

void LogitsHash::update(const float* values, size_t count) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(values);
  for (size_t i = 0; i < count * sizeof(float); ++i) {
    state_ ^= bytes[i];
    state_ *= 0x100000001b3ull;
  }
}

std::string LogitsHash::hex() const { return hash_hex(state_); }

std::string hash_hex(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace ditto
