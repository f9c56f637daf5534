#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "tokenizer/utf8.h"

namespace ditto::byte_level {
namespace {

// Code points of the alphabet, indexed by byte, and the inverse for code points below 0x144
// (the largest one used is U+0143), -1 where a code point is not in the alphabet.
struct Alphabet {
  std::array<char32_t, 256> char_of_byte{};
  std::array<int16_t, 0x144> byte_of_char{};

  Alphabet() {
    byte_of_char.fill(-1);
    char32_t next_moved = 0x100;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                             (byte >= 0xAE && byte <= 0xFF);
      const char32_t code_point = printable ? static_cast<char32_t>(byte) : next_moved++;
      char_of_byte[byte] = code_point;
      byte_of_char[code_point] = static_cast<int16_t>(byte);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

std::string char_of_byte(unsigned char byte) {
  // All alphabet code points are below U+0800: one or two UTF-8 bytes.
  const char32_t code_point = alphabet().char_of_byte[byte];
  if (code_point < 0x80) return std::string(1, static_cast<char>(code_point));
  return {static_cast<char>(0xC0 | (code_point >> 6)), static_cast<char>(0x80 | (code_point & 0x3F))};
}

std::optional<std::string> to_bytes(std::string_view text) {
  std::string bytes;
  bytes.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const auto lead = static_cast<unsigned char>(text[pos]);
    const size_t length = utf8::char_length(lead);
    char32_t code_point = lead;
    if (length == 2) {
      code_point = ((lead & 0x1F) << 6) | (static_cast<unsigned char>(text[pos + 1]) & 0x3F);
    } else if (length > 2) {
      return std::nullopt;  // three- and four-byte characters are all beyond the alphabet
    }
    if (code_point >= alphabet().byte_of_char.size() || alphabet().byte_of_char[code_point] < 0) {
      return std::nullopt;
    }
    bytes.push_back(static_cast<char>(alphabet().byte_of_char[code_point]));
    pos += length;
  }
  return bytes;
}

std::string decoded_bytes(std::string_view token) {
  std::optional<std::string> bytes = to_bytes(token);
  return bytes ? std::move(*bytes) : std::string(token);
}

}  // namespace ditto::byte_level
