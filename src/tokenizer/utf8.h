#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace ditto::utf8 {

// What the bytes at one position of a string are, by the well-formed sequences of Unicode
// (Table 3-7): a whole character, the longest prefix of a character that cannot be completed
// (a "maximal subpart", replaced by one U+FFFD as Rust's from_utf8_lossy and the WHATWG decoder
// do), or the start of a character that the string ends before completing.
struct Step {
  enum class Kind { Valid, Invalid, Truncated };
  Kind kind;
  size_t length;  // bytes covered, at least 1
};
Step next_step(std::string_view bytes, size_t pos);

// Offset of the first byte that is not part of a valid character, or npos if all are.
size_t find_invalid(std::string_view bytes);

// Appends `bytes` to `out`, each maximal invalid subpart (and an unfinished character at the
// end) replaced by U+FFFD.
void append_lossy(std::string_view bytes, std::string& out);

// Length of the prefix of `bytes` that no further bytes can change the decoding of: all but an
// unfinished character at the end.
size_t complete_prefix_length(std::string_view bytes);

// Length of the character that starts with `lead`, in valid UTF-8.
inline size_t char_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// The code point of the character that starts at `pos`, in valid UTF-8.
inline char32_t code_point_at(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(text[pos + i])); };
  const char32_t lead = byte(0);
  if (lead < 0x80) return lead;
  if (lead < 0xE0) return ((lead & 0x1F) << 6) | (byte(1) & 0x3F);
  if (lead < 0xF0) return ((lead & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
  return ((lead & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
}

// Offset where the character ending just before `end` starts, in valid UTF-8.
inline size_t previous_char_start(std::string_view text, size_t end) {
  size_t pos = end - 1;
  while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

}  // namespace ditto::utf8
