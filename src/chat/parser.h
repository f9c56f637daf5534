#pragma once
#include <memory>
#include <string_view>

#include "chat/ast.h"

namespace ditto::jinja {

// Parses a template as jinja2's parser does (jinja2/parser.py), for the statements and
// expressions of docs/chat-templates.md. Throws TemplateError at the first error.
std::unique_ptr<Program> parse(std::string_view source);

}  // namespace ditto::jinja
