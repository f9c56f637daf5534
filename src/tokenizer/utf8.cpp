#include "tokenizer/utf8.h"

namespace ditto::utf8 {

Step next_step(std::string_view bytes, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return {Step::Kind::Valid, 1};

  // Total length, and the range the second byte must fall in (narrower after E0, ED, F0, F4
  // to exclude overlong forms, surrogates and code points above U+10FFFF).
  size_t length = 0;
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;
    if (lead == 0xED) second_max = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;
    if (lead == 0xF4) second_max = 0x8F;
  } else {
    return {Step::Kind::Invalid, 1};
  }
  for (size_t i = 1; i < length; ++i) {
    if (pos + i >= bytes.size()) return {Step::Kind::Truncated, i};
    const unsigned char min = i == 1 ? second_min : 0x80;
    const unsigned char max = i == 1 ? second_max : 0xBF;
    if (byte(pos + i) < min || byte(pos + i) > max) return {Step::Kind::Invalid, i};
  }
  return {Step::Kind::Valid, length};
}

size_t find_invalid(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (static_cast<unsigned char>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Step step = next_step(bytes, pos);
    if (step.kind != Step::Kind::Valid) return pos;
    pos += step.length;
  }
  return std::string_view::npos;
}

void append_lossy(std::string_view bytes, std::string& out) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Step step = next_step(bytes, pos);
    if (step.kind == Step::Kind::Valid) {
      out.append(bytes.substr(pos, step.length));
    } else {
      out.append(kReplacement);
    }
    pos += step.length;
  }
}

size_t complete_prefix_length(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Step step = next_step(bytes, pos);
    if (step.kind == Step::Kind::Truncated) return pos;
    pos += step.length;
  }
  return bytes.size();
}

}  // namespace ditto::utf8
