#pragma once
// Python's json.dumps, which transformers' `tojson` filter calls (ensure_ascii=False and
// sort_keys=False unless the template says otherwise): key order kept, Python's float repr,
// its separators and indentation.
#include <optional>
#include <string>

#include "chat/value.h"

namespace ditto::jinja {

struct JsonFormat {
  std::optional<std::string> indent;  // none: everything on one line
  std::string item_separator = ", ";  // json.dumps' defaults without indent
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Raises ditto::Error for what JSON cannot hold (Undefined, namespaces, callables, generators).
std::string dumps(const Value& value, const JsonFormat& format);

}  // namespace ditto::jinja
