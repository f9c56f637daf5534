#pragma once
// Python's str semantics on UTF-8 text, as chat templates see them through jinja2: lengths and
// indices count code points, whitespace is str.isspace(), case mapping is Unicode's (simple
// mappings, by utf8proc), and repr() quotes as Python does. All text is valid UTF-8.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ditto::jinja::py {

std::u32string decode(std::string_view text);
std::string encode(std::u32string_view code_points);
void append_utf8(std::string& out, char32_t code_point);
size_t length(std::string_view text);  // in code points

bool is_space(char32_t c);  // str.isspace() and the \s of Python's re
bool is_cased(char32_t c);
bool is_letter(char32_t c);
bool is_decimal(char32_t c);
bool is_numeric(char32_t c);
bool is_printable(char32_t c);
// Letters, digits, combining marks and connectors: what Python identifiers are made of.
bool is_identifier_char(char32_t c);  // str.isprintable(): what repr() leaves unescaped

// str.strip / lstrip / rstrip: `chars` absent strips whitespace.
std::string strip(std::string_view text, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split / rsplit; `separator` absent splits on runs of whitespace. max_split < 0: no limit.
// An empty separator is an error (ValueError in Python), reported as ditto::Error.
std::vector<std::string> split(std::string_view text, const std::optional<std::string>& separator,
                               int64_t max_split, bool from_right);
std::vector<std::string> splitlines(std::string_view text, bool keep_ends);
std::string replace(std::string_view text, std::string_view old, std::string_view replacement,
                    int64_t count);
// Number of non-overlapping occurrences, as str.count (an empty needle matches len + 1 times).
int64_t count(std::string_view text, std::string_view needle);
// str.find / rfind: the code-point index of the first (last) occurrence, or -1.
int64_t find(std::string_view text, std::string_view needle, bool from_right);

std::string upper(std::string_view text);
std::string lower(std::string_view text);
std::string title(std::string_view text);       // str.title()
std::string capitalize(std::string_view text);  // str.capitalize()

std::string repr(std::string_view text);  // repr() of a str, quotes included
std::string float_repr(double value);     // repr() of a float: shortest round-trip digits
// Python's round(value, ndigits) for a float: correctly rounded, ties to even.
double round_float(double value, int64_t ndigits);

}  // namespace ditto::jinja::py
