#pragma once
// Splits a template into text and the tokens of its tags, as jinja2's lexer does with
// transformers' settings: trim_blocks (the newline after a block or comment tag goes),
// lstrip_blocks (spaces and tabs before a block or comment tag on its own line go), `-` and
// `+` whitespace control, raw blocks, comments, and the removal of one trailing newline.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ditto::jinja {

struct Location {
  int line = 1;
  int column = 1;  // in characters
};

enum class TokenKind {
  Data,           // template text
  VariableBegin,  // {{
  VariableEnd,    // }}
  BlockBegin,     // {%
  BlockEnd,       // %}
  Name,
  String,    // text: the value, escapes resolved
  Integer,   // integer: the value
  Float,     // number: the value
  Operator,  // text: the operator, e.g. "//"
  End,       // end of the template
};

struct Token {
  TokenKind kind;
  std::string text;
  int64_t integer = 0;
  double number = 0;
  Location where;
};

// Throws TemplateError at the place of an unexpected character, an unterminated comment or raw
// block, a bad escape in a string, or unbalanced brackets in a tag.
std::vector<Token> tokenize(std::string_view source);

}  // namespace ditto::jinja
