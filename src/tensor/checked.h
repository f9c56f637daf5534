#pragma once
// Checked arithmetic for every size and offset computed from numbers that come from outside (a
// file, a config, an argument), and the memory check before a large allocation. A size that
// would wrap, or a table larger than the machine, becomes a ditto::Error that says what asked
// for it, never a small wrapped buffer or a bare "out of memory".
//
// Header-only, so that the tokenizer (built on its own for fuzzing) can use it too.
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

#include "ditto/error.h"

namespace ditto {

// a + b, or a ditto::Error saying that `what` overflows.
inline size_t checked_add(size_t a, size_t b, std::string_view what) {
  size_t sum;
  if (__builtin_add_overflow(a, b, &sum))
    throw Error(std::string(what) + " overflows: " + std::to_string(a) + " + " + std::to_string(b) +
                " is more than 2^64 - 1");
  return sum;
}

// a * b, or a ditto::Error saying that `what` overflows.
inline size_t checked_mul(size_t a, size_t b, std::string_view what) {
  size_t product;
  if (__builtin_mul_overflow(a, b, &product))
    throw Error(std::string(what) + " overflows: " + std::to_string(a) + " x " + std::to_string(b) +
                " is more than 2^64 - 1");
  return product;
}

// The product of all factors, checked at every step.
template <typename... Factors>
size_t checked_product(std::string_view what, size_t first, Factors... rest) {
  size_t product = first;
  ((product = checked_mul(product, size_t(rest), what)), ...);
  return product;
}

// `value` rounded up to a multiple of `multiple` (> 0), checked.
inline size_t checked_round_up(size_t value, size_t multiple, std::string_view what) {
  return checked_add(value, multiple - 1, what) / multiple * multiple;
}

// "1.50 GiB"
inline std::string gib_text(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", bytes / double(1ull << 30));
  return text;
}

// The machine's physical memory in bytes.
inline size_t physical_memory() {
  static const size_t bytes = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : ~size_t(0);
  }();
  return bytes;
}

// Throws, before anything is allocated, when `what` needs more than this machine's memory:
// "the KV pool of 8 blocks of 16 positions needs 256.00 GiB, more than this machine's memory
// (23.54 GiB)". `what` says who asked and why.
inline void require_memory(size_t bytes, std::string_view what) {
  if (bytes > physical_memory())
    throw Error(std::string(what) + " needs " + gib_text(double(bytes)) + ", more than this machine's memory (" +
                gib_text(double(physical_memory())) + ")");
}

}  // namespace ditto
