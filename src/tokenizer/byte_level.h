#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace ditto::byte_level {

// GPT-2's byte-level alphabet: every byte is written as one printable character (bytes that are
// printable Latin-1 stand for themselves; the others are moved to U+0100 and up), so that a
// vocabulary of strings can hold arbitrary bytes.

// The alphabet character of `byte`, as UTF-8.
std::string char_of_byte(unsigned char byte);

// The bytes a byte-level string stands for, or nothing if one of its characters is not in the
// alphabet. `text` must be valid UTF-8.
std::optional<std::string> to_bytes(std::string_view text);

// What the ByteLevel decoder of tokenizers turns one token into: its bytes if the whole token is
// in the alphabet, else the token's own UTF-8 text (added tokens such as "<tool_call>").
std::string decoded_bytes(std::string_view token);

}  // namespace ditto::byte_level
