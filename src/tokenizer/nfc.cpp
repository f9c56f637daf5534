#include "tokenizer/nfc.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "ditto/error.h"

namespace ditto {
namespace {

bool is_ascii(char byte) { return static_cast<unsigned char>(byte) < 0x80; }

void append_nfc_by_utf8proc(std::string_view text, std::string& out) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &result,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(result, &std::free);
  if (length < 0) throw Error(std::string("NFC normalization failed: ") + utf8proc_errmsg(length));
  out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(length));
}

}  // namespace

std::string to_nfc(std::string_view text) {
  // Every ASCII character is a starter that nothing before it combines with, so normalization
  // never reaches across the start of one: the text is cut before ASCII characters, pure ASCII
  // stretches are copied, and only stretches that hold other characters go through utf8proc
  // (each from the ASCII character before them, which may be their base, e.g. "e" + U+0301).
  std::string out;
  out.reserve(text.size());
  size_t copied_to = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (is_ascii(text[pos])) {
      ++pos;
      continue;
    }
    const size_t region_start = (pos > copied_to && is_ascii(text[pos - 1])) ? pos - 1 : pos;
    size_t region_end = pos;
    while (region_end < text.size() && !is_ascii(text[region_end])) ++region_end;
    out.append(text.substr(copied_to, region_start - copied_to));
    append_nfc_by_utf8proc(text.substr(region_start, region_end - region_start), out);
    copied_to = pos = region_end;
  }
  out.append(text.substr(copied_to));
  return out;
}

}  // namespace ditto
