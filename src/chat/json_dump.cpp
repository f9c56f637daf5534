#include "chat/json_dump.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/py_text.h"
#include "ditto/error.h"

namespace ditto::jinja {

namespace {

void append_escaped(std::string& out, const std::string& text, bool ensure_ascii) {
  char buffer[16];
  out += '"';
  for (const char32_t c : py::decode(text)) {
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F && c < 0x10000)) {
      std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
      out += buffer;
    } else if (ensure_ascii && c >= 0x10000) {
      const char32_t v = c - 0x10000;
      std::snprintf(buffer, sizeof buffer, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 | (v >> 10)),
                    static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
      out += buffer;
    } else {
      py::append_utf8(out, c);
    }
  }
  out += '"';
}

class Writer {
 public:
  explicit Writer(const JsonFormat& format) : format_(format) {}

  void write(const Value& value, int depth) {
    if (depth > 512) throw Error("tojson: the value is nested too deeply");
    if (value.is_none()) {
      out_ += "null";
    } else if (value.is<bool>()) {
      out_ += value.as<bool>() ? "true" : "false";
    } else if (value.is<int64_t>()) {
      out_ += std::to_string(value.as<int64_t>());
    } else if (value.is<double>()) {
      const double d = value.as<double>();
      out_ += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : py::float_repr(d);
    } else if (value.is_string()) {
      append_escaped(out_, value.string(), format_.ensure_ascii);
    } else if (const List* list = value.list()) {
      write_list(*list, depth);
    } else if (const Dict* dict = value.dict()) {
      write_dict(*dict, depth);
    } else {
      throw Error("Object of type " + value.type_name() + " is not JSON serializable");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  // Before an item: nothing on one line, else a newline and the indentation of its depth.
  void newline(int depth) {
    if (!format_.indent) return;
    out_ += '\n';
    for (int i = 0; i < depth; ++i) out_ += *format_.indent;
  }

  void write_list(const List& list, int depth) {
    if (list.items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    for (size_t i = 0; i < list.items.size(); ++i) {
      if (i > 0) out_ += format_.item_separator;
      newline(depth + 1);
      write(list.items[i], depth + 1);
    }
    newline(depth);
    out_ += ']';
  }

  void write_dict(const Dict& dict, int depth) {
    if (dict.entries.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& entry : dict.entries) entries.push_back(&entry);
    if (format_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return a->first < b->first; });
    }
    out_ += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out_ += format_.item_separator;
      newline(depth + 1);
      append_escaped(out_, entries[i]->first, format_.ensure_ascii);
      out_ += format_.key_separator;
      write(entries[i]->second, depth + 1);
    }
    newline(depth);
    out_ += '}';
  }

  const JsonFormat& format_;
  std::string out_;
};

}  // namespace

std::string dumps(const Value& value, const JsonFormat& format) {
  Writer writer(format);
  writer.write(value, 0);
  return writer.take();
}

}  // namespace ditto::jinja
