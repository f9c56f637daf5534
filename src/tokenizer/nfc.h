#pragma once
#include <string>
#include <string_view>

namespace ditto {

// Unicode Normalization Form C of valid UTF-8 text, by utf8proc.
std::string to_nfc(std::string_view text);

}  // namespace ditto
