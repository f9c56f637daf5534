#include "chat/py_text.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "ditto/error.h"

namespace ditto::jinja::py {

namespace {

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

char32_t map_case(char32_t c, utf8proc_int32_t (*mapping)(utf8proc_int32_t)) {
  return static_cast<char32_t>(mapping(static_cast<utf8proc_int32_t>(c)));
}

}  // namespace

std::u32string decode(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    char32_t c = n == 1 ? lead : n == 2 ? lead & 0x1F : n == 3 ? lead & 0x0F : lead & 0x07;
    for (size_t k = 1; k < n && i + k < text.size(); ++k) {
      c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    }
    out.push_back(c);
    i += n;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string encode(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (const char32_t c : code_points) append_utf8(out, c);
  return out;
}

size_t length(std::string_view text) {
  size_t n = 0;
  for (const char byte : text) n += (static_cast<unsigned char>(byte) & 0xC0) != 0x80;
  return n;
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_cased(char32_t c) {
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

bool is_letter(char32_t c) {
  const auto cat = category(c);
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
}

bool is_decimal(char32_t c) { return category(c) == UTF8PROC_CATEGORY_ND; }

bool is_numeric(char32_t c) {
  const auto cat = category(c);
  return cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO;
}

bool is_identifier_char(char32_t c) {
  const auto cat = category(c);
  return is_letter(c) || is_numeric(c) || cat == UTF8PROC_CATEGORY_MN ||
         cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_PC;
}

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

std::string strip(std::string_view text, const std::optional<std::string>& chars, bool left,
                  bool right) {
  const std::u32string cps = decode(text);
  const std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strippable = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_space(c);
  };
  size_t begin = 0, end = cps.size();
  if (left) {
    while (begin < end && strippable(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strippable(cps[end - 1])) --end;
  }
  return encode(std::u32string_view(cps).substr(begin, end - begin));
}

std::vector<std::string> split(std::string_view text, const std::optional<std::string>& separator,
                               int64_t max_split, bool from_right) {
  std::vector<std::string> parts;
  if (max_split < 0) max_split = INT64_MAX;
  if (separator) {
    // Valid UTF-8 needles only match at character boundaries, so bytes will do.
    const std::string& sep = *separator;
    if (sep.empty()) throw Error("empty separator");
    if (!from_right) {
      size_t start = 0;
      for (size_t found; max_split > 0 && (found = text.find(sep, start)) != std::string_view::npos;
           --max_split) {
        parts.emplace_back(text.substr(start, found - start));
        start = found + sep.size();
      }
      parts.emplace_back(text.substr(start));
    } else {
      size_t end = text.size();
      for (; max_split > 0 && end >= sep.size(); --max_split) {
        const size_t found = text.substr(0, end).rfind(sep);
        if (found == std::string_view::npos) break;
        parts.emplace_back(text.substr(found + sep.size(), end - found - sep.size()));
        end = found;
      }
      parts.emplace_back(text.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
    return parts;
  }
  // CPython's split_whitespace / rsplit_whitespace.
  const std::u32string cps = decode(text);
  const size_t n = cps.size();
  if (!from_right) {
    size_t i = 0;
    for (; max_split > 0; --max_split) {
      while (i < n && is_space(cps[i])) ++i;
      if (i == n) break;
      const size_t j = i;
      while (i < n && !is_space(cps[i])) ++i;
      parts.push_back(encode(std::u32string_view(cps).substr(j, i - j)));
    }
    while (i < n && is_space(cps[i])) ++i;
    if (i < n) parts.push_back(encode(std::u32string_view(cps).substr(i)));
  } else {
    size_t i = n;
    for (; max_split > 0; --max_split) {
      while (i > 0 && is_space(cps[i - 1])) --i;
      if (i == 0) break;
      const size_t j = i;
      while (i > 0 && !is_space(cps[i - 1])) --i;
      parts.push_back(encode(std::u32string_view(cps).substr(i, j - i)));
    }
    while (i > 0 && is_space(cps[i - 1])) --i;
    if (i > 0) parts.push_back(encode(std::u32string_view(cps).substr(0, i)));
    std::reverse(parts.begin(), parts.end());
  }
  return parts;
}

std::vector<std::string> splitlines(std::string_view text, bool keep_ends) {
  const std::u32string cps = decode(text);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const bool is_break = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C ||
                          c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!is_break) continue;
    size_t end = i + 1;
    if (c == '\r' && end < cps.size() && cps[end] == '\n') ++end;
    lines.push_back(encode(std::u32string_view(cps).substr(start, (keep_ends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < cps.size()) lines.push_back(encode(std::u32string_view(cps).substr(start)));
  return lines;
}

std::string replace(std::string_view text, std::string_view old, std::string_view replacement,
                    int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    const std::u32string cps = decode(text);
    size_t i = 0;
    for (; i <= cps.size() && count > 0; ++i, --count) {
      out += replacement;
      if (i < cps.size()) append_utf8(out, cps[i]);
    }
    if (i < cps.size()) out += encode(std::u32string_view(cps).substr(i));
    return out;
  }
  size_t start = 0;
  for (size_t found; count > 0 && (found = text.find(old, start)) != std::string_view::npos;
       --count) {
    out.append(text.substr(start, found - start));
    out.append(replacement);
    start = found + old.size();
  }
  out.append(text.substr(start));
  return out;
}

int64_t count(std::string_view text, std::string_view needle) {
  if (needle.empty()) return static_cast<int64_t>(length(text)) + 1;
  int64_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string_view::npos;
       pos = text.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

int64_t find(std::string_view text, std::string_view needle, bool from_right) {
  const size_t pos = from_right ? text.rfind(needle) : text.find(needle);
  if (pos == std::string_view::npos) return -1;
  return static_cast<int64_t>(length(text.substr(0, pos)));
}

std::string upper(std::string_view text) {
  std::string out;
  for (const char32_t c : decode(text)) append_utf8(out, map_case(c, utf8proc_toupper));
  return out;
}

std::string lower(std::string_view text) {
  std::string out;
  for (const char32_t c : decode(text)) append_utf8(out, map_case(c, utf8proc_tolower));
  return out;
}

std::string title(std::string_view text) {
  std::string out;
  bool previous_is_cased = false;
  for (const char32_t c : decode(text)) {
    append_utf8(out, map_case(c, previous_is_cased ? utf8proc_tolower : utf8proc_totitle));
    previous_is_cased = is_cased(c);
  }
  return out;
}

std::string capitalize(std::string_view text) {
  std::string out;
  bool first = true;
  for (const char32_t c : decode(text)) {
    append_utf8(out, map_case(c, first ? utf8proc_totitle : utf8proc_tolower));
    first = false;
  }
  return out;
}

std::string repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  char buffer[16];
  for (const char32_t c : decode(text)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(buffer, sizeof buffer, "\\x%02x", static_cast<unsigned>(c));
      out += buffer;
    } else if (c < 0x80 || is_printable(c)) {
      append_utf8(out, c);
    } else {
      const char* format = c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x";
      std::snprintf(buffer, sizeof buffer, format, static_cast<unsigned>(c));
      out += buffer;
    }
  }
  out += quote;
  return out;
}

std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  // The shortest digits that read back as `value`, placed as CPython's repr places them:
  // positional for decimal exponents from -4 to 15, scientific otherwise.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  const std::string_view sci(buffer, result.ptr - buffer);
  const size_t e = sci.find('e');
  std::string_view mantissa = sci.substr(0, e);
  const bool negative = mantissa.front() == '-';
  if (negative) mantissa.remove_prefix(1);
  std::string digits;
  for (const char ch : mantissa) {
    if (ch != '.') digits += ch;
  }
  int exponent = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+'), sci.data() + sci.size(), exponent);
  const int point = exponent + 1;  // digits before the decimal point
  std::string out = negative ? "-" : "";
  if (point <= -4 || point > 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    std::snprintf(buffer, sizeof buffer, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += buffer;
  } else if (point <= 0) {
    out += "0." + std::string(-point, '0') + digits;
  } else if (static_cast<size_t>(point) >= digits.size()) {
    out += digits + std::string(point - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, point) + "." + digits.substr(point);
  }
  return out;
}

double round_float(double value, int64_t ndigits) {
  if (!std::isfinite(value) || value == 0) return value;
  if (ndigits > 323) return value;  // finer than any double
  if (ndigits >= 0) {
    // printf rounds the exact binary value correctly, ties to even, as CPython's dtoa does.
    std::string text(400, '\0');
    const int n = std::snprintf(text.data(), text.size(), "%.*f", static_cast<int>(ndigits), value);
    return std::strtod(std::string(text.data(), n).c_str(), nullptr);
  }
  if (ndigits < -308) return std::copysign(0.0, value);
  const double scale = std::pow(10.0, static_cast<double>(-ndigits));
  return std::nearbyint(value / scale) * scale;
}

}  // namespace ditto::jinja::py
