#include "chat/lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "chat/py_text.h"
#include "ditto/chat_template.h"
#include "tokenizer/utf8.h"

namespace ditto::jinja {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_hex_digit(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

char32_t hex_value(char c) {
  return is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
}

// jinja2 reads \r\n, \r and \n alike as a line break, and drops one newline at the end
// (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

enum class Tag { Variable, Block, Comment };

class Lexer {
 public:
  explicit Lexer(std::string_view source) : source_(normalize_newlines(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < source_.size(); ++i) {
      if (source_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    const size_t bad = utf8::find_invalid(source_);
    if (bad != std::string::npos) fail("the template is not valid UTF-8", bad);
    while (pos_ < source_.size()) lex_text_and_tag();
    emit(TokenKind::End, "", source_.size());
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& reason, size_t offset) {
    const Location where = location(offset);
    throw TemplateError(reason, where.line, where.column);
  }

  // Line and column (in characters) of an offset. Tokens come in order, so this walks on from
  // the last place asked for; an earlier offset (only for an error) starts from its line.
  Location location(size_t offset) {
    if (offset < located_offset_) {
      const auto line = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
      located_offset_ = *line;
      located_ = {static_cast<int>(line - line_starts_.begin()) + 1, 1};
    }
    for (; located_offset_ < offset; ++located_offset_) {
      const char c = source_[located_offset_];
      if (c == '\n') {
        ++located_.line;
        located_.column = 1;
      } else if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) {
        ++located_.column;
      }
    }
    return located_;
  }

  Token& emit(TokenKind kind, std::string text, size_t offset) {
    tokens_.push_back(Token{kind, std::move(text), 0, 0, location(offset)});
    return tokens_.back();
  }

  bool starts_with(size_t at, std::string_view prefix) const {
    return std::string_view(source_).substr(at).starts_with(prefix);
  }

  // Python's \s* (Unicode whitespace) from `at`; returns where it stops.
  size_t skip_spaces(size_t at) const {
    while (at < source_.size()) {
      const auto lead = static_cast<unsigned char>(source_[at]);
      const size_t n = utf8::char_length(lead);
      const char32_t c = lead < 0x80 ? lead : py::decode(std::string_view(source_).substr(at, n))[0];
      if (!py::is_space(c)) break;
      at += n;
    }
    return at;
  }

  // Text up to the next tag, then the tag.
  void lex_text_and_tag() {
    size_t tag_start = pos_;
    Tag tag = Tag::Variable;
    for (;; ++tag_start) {
      tag_start = source_.find('{', tag_start);
      if (tag_start == std::string::npos || tag_start + 1 >= source_.size()) {
        emit(TokenKind::Data, source_.substr(pos_), pos_);
        pos_ = source_.size();
        return;
      }
      const char next = source_[tag_start + 1];
      if (next == '{' || next == '%' || next == '#') {
        tag = next == '{' ? Tag::Variable : next == '%' ? Tag::Block : Tag::Comment;
        break;
      }
    }
    size_t after = tag_start + 2;
    char sign = 0;
    if (after < source_.size() && (source_[after] == '-' || source_[after] == '+')) sign = source_[after++];
    const size_t raw_end = tag == Tag::Block ? match_raw_begin(after) : std::string::npos;

    emit_text(pos_, tag_start, sign, tag != Tag::Variable);
    if (raw_end != std::string::npos) {
      line_starting_ = source_[raw_end - 1] == '\n';
      lex_raw(raw_end);
    } else if (tag == Tag::Comment) {
      lex_comment(tag_start, after);
    } else {
      line_starting_ = false;
      pos_ = after;
      lex_tag(tag, tag_start);
    }
  }

  // The text before a tag, with the tag's whitespace control applied: `-` strips all whitespace
  // before it; otherwise a block or comment tag alone on its line takes the spaces before it.
  void emit_text(size_t begin, size_t end, char sign, bool lstrip) {
    std::string text = source_.substr(begin, end - begin);
    if (sign == '-') {
      text = py::strip(text, std::nullopt, false, true);
    } else if (sign != '+' && lstrip) {
      const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if (line_start > 0 || line_starting_) {
        const std::string_view tail = std::string_view(text).substr(line_start);
        if (!tail.empty() && py::strip(tail, std::nullopt, true, true).empty()) text.resize(line_start);
      }
    }
    if (!text.empty()) emit(TokenKind::Data, std::move(text), begin);
  }

  // `{% raw %}` after the `{%` and its sign: the offset after it, or npos.
  size_t match_raw_begin(size_t at) const {
    at = skip_spaces(at);
    if (!starts_with(at, "raw")) return std::string::npos;
    at = skip_spaces(at + 3);
    if (starts_with(at, "-%}")) return skip_spaces(at + 3);
    if (starts_with(at, "%}")) return at + 2;
    return std::string::npos;
  }

  void lex_raw(size_t content_start) {
    for (size_t at = source_.find("{%", content_start); at != std::string::npos;
         at = source_.find("{%", at + 1)) {
      size_t p = at + 2;
      char sign = 0;
      if (p < source_.size() && (source_[p] == '-' || source_[p] == '+')) sign = source_[p++];
      p = skip_spaces(p);
      if (!starts_with(p, "endraw")) continue;
      p = skip_spaces(p + 6);
      const size_t end = end_of_block_tag(p);
      if (end == std::string::npos) continue;
      emit_text(content_start, at, sign, true);
      line_starting_ = source_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    fail("missing end of raw block ({% endraw %})", content_start);
  }

  // Where a block tag's end (`%}`, `-%}`, `+%}` with their whitespace rules) that starts at `at`
  // stops, or npos if none starts there.
  size_t end_of_block_tag(size_t at) const {
    if (starts_with(at, "+%}")) return at + 3;
    if (starts_with(at, "-%}")) return skip_spaces(at + 3);
    if (starts_with(at, "%}")) return at + 2 + (starts_with(at + 2, "\n") ? 1 : 0);
    return std::string::npos;
  }

  void lex_comment(size_t tag_start, size_t content_start) {
    for (size_t at = content_start; at < source_.size(); ++at) {
      size_t end = std::string::npos;
      if (starts_with(at, "+#}")) {
        end = at + 3;
      } else if (starts_with(at, "-#}")) {
        end = skip_spaces(at + 3);
      } else if (starts_with(at, "#}")) {
        end = at + 2 + (starts_with(at + 2, "\n") ? 1 : 0);
      }
      if (end != std::string::npos) {
        line_starting_ = source_[end - 1] == '\n';
        pos_ = end;
        return;
      }
    }
    fail("missing end of comment tag (#})", tag_start);
  }

  void lex_tag(Tag tag, size_t tag_start) {
    emit(tag == Tag::Variable ? TokenKind::VariableBegin : TokenKind::BlockBegin, "", tag_start);
    std::vector<char> brackets;  // closing brackets expected, innermost last
    while (pos_ < source_.size()) {
      if (brackets.empty() && lex_tag_end(tag)) return;
      const size_t spaces_end = skip_spaces(pos_);
      if (spaces_end > pos_) {
        pos_ = spaces_end;
      } else if (!lex_number() && !lex_name() && !lex_string()) {
        lex_operator(brackets);
      }
      line_starting_ = source_[pos_ - 1] == '\n';
    }
    // The parser reports the missing end of the tag.
  }

  bool lex_tag_end(Tag tag) {
    size_t end = std::string::npos;
    if (tag == Tag::Block) {
      end = end_of_block_tag(pos_);
    } else if (starts_with(pos_, "-}}")) {
      end = skip_spaces(pos_ + 3);
    } else if (starts_with(pos_, "}}")) {
      end = pos_ + 2;
    }
    if (end == std::string::npos) return false;
    emit(tag == Tag::Variable ? TokenKind::VariableEnd : TokenKind::BlockEnd, "", pos_);
    line_starting_ = source_[end - 1] == '\n';
    pos_ = end;
    return true;
  }

  // `(\d+_)*\d+` from `at`: where it stops, or `at` if there is no digit.
  size_t digits_end(size_t at) const {
    if (at >= source_.size() || !is_digit(source_[at])) return at;
    while (true) {
      while (at < source_.size() && is_digit(source_[at])) ++at;
      if (at + 1 < source_.size() && source_[at] == '_' && is_digit(source_[at + 1])) {
        ++at;
      } else {
        return at;
      }
    }
  }

  std::string without_underscores(size_t begin, size_t end) const {
    std::string text;
    for (size_t i = begin; i < end; ++i) {
      if (source_[i] != '_') text += source_[i];
    }
    return text;
  }

  // jinja2's float_re, then integer_re.
  bool lex_number() {
    if (!is_digit(source_[pos_])) return false;
    const size_t int_end = digits_end(pos_);
    if (pos_ == 0 || source_[pos_ - 1] != '.') {
      size_t fraction_end = std::string::npos;
      if (int_end < source_.size() && source_[int_end] == '.' && digits_end(int_end + 1) > int_end + 1) {
        fraction_end = digits_end(int_end + 1);
      }
      size_t end = exponent_end(fraction_end != std::string::npos ? fraction_end : int_end);
      if (end == std::string::npos && fraction_end != std::string::npos) end = fraction_end;
      if (end != std::string::npos) {
        Token& token = emit(TokenKind::Float, source_.substr(pos_, end - pos_), pos_);
        token.number = std::strtod(without_underscores(pos_, end).c_str(), nullptr);
        pos_ = end;
        return true;
      }
    }
    lex_integer();
    return true;
  }

  // `e[+\-]?(\d+_)*\d+` (any case) at `at`: where it stops, or npos.
  size_t exponent_end(size_t at) const {
    if (at >= source_.size() || (source_[at] != 'e' && source_[at] != 'E')) return std::string::npos;
    size_t p = at + 1;
    if (p < source_.size() && (source_[p] == '+' || source_[p] == '-')) ++p;
    const size_t end = digits_end(p);
    return end > p ? end : std::string::npos;
  }

  void lex_integer() {
    const size_t start = pos_;
    int base = 10;
    size_t end = start;
    const char prefix = start + 1 < source_.size() ? static_cast<char>(source_[start + 1] | 0x20) : 0;
    if (source_[start] == '0' && (prefix == 'b' || prefix == 'o' || prefix == 'x')) {
      base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
      auto in_base = [&](char c) {
        return base == 16 ? is_hex_digit(c) : c >= '0' && c < static_cast<char>('0' + base);
      };
      // (_?[digit])+
      size_t p = start + 2;
      while (true) {
        size_t q = p;
        if (q < source_.size() && source_[q] == '_') ++q;
        if (q < source_.size() && in_base(source_[q])) {
          p = q + 1;
        } else {
          break;
        }
      }
      if (p > start + 2) end = p;
    }
    if (end == start) {
      // [1-9](_?\d)*  or  0(_?0)*
      const bool zero = source_[start] == '0';
      size_t p = start + 1;
      while (true) {
        size_t q = p;
        if (q < source_.size() && source_[q] == '_') ++q;
        if (q < source_.size() && (zero ? source_[q] == '0' : is_digit(source_[q]))) {
          p = q + 1;
        } else {
          break;
        }
      }
      end = p;
      base = 10;
    }
    std::string digits = without_underscores(start, end);
    if (base != 10) digits = digits.substr(2);
    errno = 0;
    char* parsed_end = nullptr;
    const long long value = std::strtoll(digits.c_str(), &parsed_end, base);
    if (errno == ERANGE) fail("integer literal too large", start);
    Token& token = emit(TokenKind::Integer, source_.substr(start, end - start), start);
    token.integer = value;
    pos_ = end;
  }

  // Names as jinja2 reads them: letters, digits, underscores and combining marks, not starting
  // with a digit.
  bool lex_name() {
    size_t end = pos_;
    while (end < source_.size()) {
      const auto lead = static_cast<unsigned char>(source_[end]);
      const size_t n = utf8::char_length(lead);
      bool part;
      if (lead < 0x80) {
        part = std::isalnum(lead) || lead == '_';
      } else {
        const char32_t c = py::decode(std::string_view(source_).substr(end, n))[0];
        part = py::is_identifier_char(c);
      }
      if (!part) break;
      end += n;
    }
    if (end == pos_) return false;
    const std::string name = source_.substr(pos_, end - pos_);
    // A name cannot start with a digit (ASCII digits were read as numbers before this).
    if (static_cast<unsigned char>(name[0]) >= 0x80 && py::is_numeric(py::decode(name)[0])) {
      fail("invalid character in identifier", pos_);
    }
    emit(TokenKind::Name, name, pos_);
    pos_ = end;
    return true;
  }

  bool lex_string() {
    const char quote = source_[pos_];
    if (quote != '\'' && quote != '"') return false;
    size_t end = pos_ + 1;
    while (end < source_.size() && source_[end] != quote) end += source_[end] == '\\' ? 2 : 1;
    if (end >= source_.size()) return false;  // unterminated: reported as an unexpected quote
    Token& token = emit(TokenKind::String, "", pos_);
    token.text = unescape(pos_ + 1, end);
    pos_ = end + 1;
    return true;
  }

  // Python's unicode-escape decoding, which jinja2 applies to string literals.
  std::string unescape(size_t begin, size_t end) {
    std::string out;
    for (size_t i = begin; i < end;) {
      if (source_[i] != '\\') {
        out += source_[i++];
        continue;
      }
      const size_t at = i;
      const char c = source_[i + 1];
      i += 2;
      if (static_cast<unsigned char>(c) >= 0x80) {
        // jinja2 first turns non-ASCII characters into \x, \u or \U escapes, so a backslash
        // before one escapes the backslash of that escape.
        const size_t n = utf8::char_length(static_cast<unsigned char>(c));
        const char32_t cp = py::decode(std::string_view(source_).substr(i - 1, n))[0];
        char buffer[16];
        std::snprintf(buffer, sizeof buffer, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x",
                      static_cast<unsigned>(cp));
        out += buffer;
        i += n - 1;
        continue;
      }
      switch (c) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
          char32_t value = 0;
          for (size_t k = 0; k < digits; ++k, ++i) {
            if (i >= end || !is_hex_digit(source_[i])) {
              fail(std::string("truncated \\") + c + " escape in a string", at);
            }
            value = value * 16 + hex_value(source_[i]);
          }
          if (value > 0x10FFFF) fail("illegal Unicode character in a string", at);
          if (value >= 0xD800 && value <= 0xDFFF) fail("a lone surrogate cannot be part of a string", at);
          py::append_utf8(out, value);
          break;
        }
        case 'N':
          fail("\\N{...} escapes are not supported", at);
        default:
          if (c >= '0' && c <= '7') {
            char32_t value = c - '0';
            for (int k = 0; k < 2 && i < end && source_[i] >= '0' && source_[i] <= '7'; ++k, ++i) {
              value = value * 8 + (source_[i] - '0');
            }
            py::append_utf8(out, value);
          } else {
            out += '\\';
            out += c;
          }
      }
    }
    return out;
  }

  void lex_operator(std::vector<char>& brackets) {
    static constexpr std::string_view two_char[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const std::string_view op : two_char) {
      if (starts_with(pos_, op)) {
        emit(TokenKind::Operator, std::string(op), pos_);
        pos_ += 2;
        return;
      }
    }
    const char c = source_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      const size_t n = utf8::char_length(static_cast<unsigned char>(c));
      fail("unexpected character " + py::repr(source_.substr(pos_, n)), pos_);
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) fail(std::string("unexpected '") + c + "'", pos_);
      if (brackets.back() != c) {
        fail(std::string("unexpected '") + c + "', expected '" + brackets.back() + "'", pos_);
      }
      brackets.pop_back();
    }
    emit(TokenKind::Operator, std::string(1, c), pos_);
    ++pos_;
  }

  std::string source_;
  std::vector<size_t> line_starts_;
  size_t located_offset_ = 0;  // location() walked up to here
  Location located_;
  size_t pos_ = 0;
  bool line_starting_ = true;  // the last match ended a line (lstrip_blocks needs this)
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace ditto::jinja
