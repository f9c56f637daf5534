// jinja2's builtin filters (jinja2/filters.py), with transformers' tojson.
#include <algorithm>
#include <cmath>
#include <limits>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/json_dump.h"
#include "chat/operations.h"
#include "chat/py_text.h"
#include "ditto/error.h"

namespace ditto::jinja {

namespace {

using I = Interpreter;
using A = CallArgs;

// A path of attributes or items such as "function.name" or "0.role" (digits are indices), as
// jinja2's make_attrgetter reads it.
std::vector<Value> attribute_path(const Value& attribute) {
  if (attribute.is_none()) return {};
  if (!attribute.is_string()) return {attribute};
  std::vector<Value> parts;
  for (std::string& part : py::split(attribute.string(), std::string("."), -1, false)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits && part.size() < 19) {
      parts.emplace_back(static_cast<int64_t>(std::stoll(part)));
    } else {
      parts.emplace_back(std::move(part));
    }
  }
  return parts;
}

Value look_up(Value item, const std::vector<Value>& path, const Value* fallback = nullptr) {
  for (const Value& part : path) {
    fail_if_undefined(item);
    item = get_item(item, part);
    if (fallback != nullptr && item.is_undefined()) item = *fallback;
  }
  return item;
}

Value ignore_case(const Value& value) { return value.is_string() ? Value(py::lower(value.string())) : value; }

Value string_filter(const Value& input, std::string (*transform)(std::string_view), A& args,
                    std::string_view name) {
  BoundArgs(name, args, {});
  return Value(transform(input.str()));
}

Value do_abs(I&, const Value& v, A& a) {
  BoundArgs("abs", a, {});
  fail_if_undefined(v);
  if (v.is<double>()) return Value(std::fabs(v.as<double>()));
  if (!v.is_integer()) throw Error("bad operand type for abs(): '" + v.type_name() + "'");
  if (v.integer() == std::numeric_limits<int64_t>::min()) throw Error("integer overflow");
  return Value(v.integer() < 0 ? -v.integer() : v.integer());
}

Value do_attr(I&, const Value& v, A& a) {
  BoundArgs args("attr", a, {"name"}, 1);
  fail_if_undefined(v);
  return get_attribute(v, to_string_arg("attr", args[0]), true);
}

// The generator filters bind their arguments when called, as Python calls a generator function,
// and do the rest when iterated (lazily).
Value do_batch(I&, const Value& v, A& a) {
  BoundArgs args("batch", a, {"linecount", "fill_with"}, 1);
  return lazily([&] {
    const int64_t count = to_integer("batch", args[0]);
    std::vector<Value> batches, current;
    for (Value& item : iterate(v)) {
      if (static_cast<int64_t>(current.size()) == count) {
        batches.push_back(Value::list(std::move(current)));
        current.clear();
      }
      current.push_back(std::move(item));
    }
    if (!current.empty()) {
      if (args.given(1)) {
        while (static_cast<int64_t>(current.size()) < count) current.push_back(args[1]);
      }
      batches.push_back(Value::list(std::move(current)));
    }
    return batches;
  });
}

// str(value).center(width), by the str method.
Value do_center(I& interpreter, const Value& v, A& a) {
  BoundArgs args("center", a, {"width"});
  CallArgs call{{args.get(0, Value(int64_t{80}))}, {}};
  return interpreter.call(get_attribute(Value(v.str()), "center"), call);
}

Value do_default(I&, const Value& v, A& a) {
  BoundArgs args("default", a, {"default_value", "boolean"});
  const bool boolean = args.has(1) && args[1].truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return args.get(0, Value(""));
  return v;
}

Value do_dictsort(I&, const Value& v, A& a) {
  BoundArgs args("dictsort", a, {"case_sensitive", "by", "reverse"});
  const Dict* dict = v.dict();
  if (dict == nullptr) throw Error("dictsort: '" + v.type_name() + "' object has no attribute 'items'");
  const bool case_sensitive = args.has(0) && args[0].truthy();
  const std::string by = args.has(1) ? to_string_arg("dictsort", args[1]) : "key";
  if (by != "key" && by != "value") throw Error("You can only sort by either \"key\" or \"value\"");
  const bool reverse = args.has(2) && to_integer("dictsort", args[2]) != 0;  // sorted() needs an int
  std::vector<std::pair<Value, Value>> keyed;  // sort key, (key, value) tuple
  for (const auto& [key, value] : dict->entries) {
    const Value sort_key = by == "key" ? Value(key) : value;
    keyed.emplace_back(case_sensitive ? sort_key : ignore_case(sort_key),
                       Value::list({Value(key), value}, SequenceKind::Tuple));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less(y.first, x.first) : less(x.first, y.first);
  });
  std::vector<Value> items;
  for (auto& entry : keyed) items.push_back(std::move(entry.second));
  return Value::list(std::move(items));
}

Value do_escape(I&, const Value& v, A& a) {
  BoundArgs("escape", a, {});
  std::string out;
  for (const char c : v.str()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

Value do_first(I&, const Value& v, A& a) {
  BoundArgs("first", a, {});
  if (v.is<std::shared_ptr<Generator>>()) {
    Generator& g = consume(v);
    if (g.next < g.items.size()) return g.items[g.next++];
  } else {
    std::vector<Value> items = iterate(v);
    if (!items.empty()) return items.front();
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value do_last(I&, const Value& v, A& a) {
  BoundArgs("last", a, {});
  if (v.is<std::shared_ptr<Generator>>()) throw Error("'generator' object is not reversible");
  std::vector<Value> items = iterate(v);
  if (!items.empty()) return items.back();
  return Value::undefined("No last item, sequence was empty.");
}

// Python's float(str): optional sign, digits with single underscores between them, a point,
// an exponent; or inf, infinity, nan; surrounded by whitespace.
std::optional<double> parse_float(const std::string& text) {
  std::string s = py::strip(text, std::nullopt, true, true);
  std::string lowered = py::lower(s);
  size_t i = 0;
  if (i < lowered.size() && (lowered[i] == '+' || lowered[i] == '-')) ++i;
  const std::string_view word = std::string_view(lowered).substr(i);
  if (word == "inf" || word == "infinity" || word == "nan") return std::strtod(lowered.c_str(), nullptr);
  std::string digits = s.substr(0, i);
  bool any_digit = false, seen_point = false, seen_exponent = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      any_digit = true;
      digits += c;
    } else if (c == '_' && i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1])) && i + 1 < s.size() &&
               std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      continue;
    } else if (c == '.' && !seen_point && !seen_exponent) {
      seen_point = true;
      digits += c;
    } else if ((c == 'e' || c == 'E') && any_digit && !seen_exponent) {
      seen_exponent = true;
      any_digit = false;
      digits += c;
      if (i + 1 < s.size() && (s[i + 1] == '+' || s[i + 1] == '-')) digits += s[++i];
    } else {
      return std::nullopt;
    }
  }
  if (!any_digit) return std::nullopt;
  return std::strtod(digits.c_str(), nullptr);
}

// Python's int(str, base) for bases 0 and 2 to 36.
std::optional<int64_t> parse_int(const std::string& text, int64_t base) {
  std::string s = py::lower(py::strip(text, std::nullopt, true, true));
  bool negative = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  auto has_prefix = [&](char p) { return i + 1 < s.size() && s[i] == '0' && s[i + 1] == p; };
  if (base == 0) {
    base = has_prefix('x') ? 16 : has_prefix('o') ? 8 : has_prefix('b') ? 2 : 10;
    if (base == 10 && i + 1 < s.size() && s[i] == '0' && s.find_first_not_of("0_", i) != std::string::npos) {
      return std::nullopt;  // Python refuses leading zeros in base 0
    }
  }
  if ((base == 16 && has_prefix('x')) || (base == 8 && has_prefix('o')) || (base == 2 && has_prefix('b'))) {
    i += 2;
    if (i < s.size() && s[i] == '_') ++i;
  }
  if (i >= s.size()) return std::nullopt;
  int64_t value = 0;
  bool last_underscore = true;  // no underscore first
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '_') {
      if (last_underscore) return std::nullopt;
      last_underscore = true;
      continue;
    }
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
    if (digit >= base) return std::nullopt;
    if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, digit, &value)) {
      return std::nullopt;
    }
    last_underscore = false;
  }
  if (last_underscore) return std::nullopt;
  return negative ? -value : value;
}

std::optional<int64_t> float_to_int(double d) {
  if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return std::nullopt;
  return static_cast<int64_t>(d);
}

Value do_int(I&, const Value& v, A& a) {
  BoundArgs args("int", a, {"default", "base"});
  fail_if_undefined(v);
  const int64_t base = args.has(1) ? to_integer("int", args[1]) : 10;
  if (base != 0 && (base < 2 || base > 36)) throw Error("int() base must be >= 2 and <= 36, or 0");
  std::optional<int64_t> result;
  if (v.is_string()) {
    result = parse_int(v.string(), base);
    if (!result) {
      if (const auto d = parse_float(v.string())) result = float_to_int(*d);
    }
  } else if (v.is_integer()) {
    result = v.integer();
  } else if (v.is<double>()) {
    result = float_to_int(v.as<double>());
  }
  return result ? Value(*result) : args.get(0, Value(int64_t{0}));
}

Value do_float(I&, const Value& v, A& a) {
  BoundArgs args("float", a, {"default"});
  fail_if_undefined(v);
  if (v.is_number()) return Value(v.number());
  if (v.is_string()) {
    if (const auto d = parse_float(v.string())) return Value(*d);
  }
  return args.get(0, Value(0.0));
}

Value do_format(I&, const Value& v, A& a) {
  if (!a.positional.empty() && !a.keyword.empty()) {
    throw Error("format: can't handle positional and keyword arguments at the same time");
  }
  if (!a.keyword.empty()) {
    Dict kwargs;
    for (auto& [key, value] : a.keyword) kwargs.set(key, value);
    return Value(percent_format(v.str(), Value(std::move(kwargs))));
  }
  return Value(percent_format(v.str(), Value::list(a.positional, SequenceKind::Tuple)));
}

Value do_indent(I& interpreter, const Value& v, A& a) {
  BoundArgs args("indent", a, {"width", "first", "blank"});
  // jinja2 appends a newline to the value itself, which only a string allows.
  if (!v.is_string()) throw Error("unsupported operand type(s) for +=: '" + v.type_name() + "' and 'str'");
  std::string indentation = "    ";
  if (args.has(0)) {
    indentation = args[0].is_string() ? args[0].string()
                                      : std::string(std::clamp<int64_t>(to_integer("indent", args[0]), 0, 1 << 16), ' ');
  }
  const bool first = args.has(1) && args[1].truthy();
  const bool blank = args.has(2) && args[2].truthy();
  std::vector<std::string> lines = py::splitlines(v.str() + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i > 0 && (blank || !lines[i].empty())) out += indentation;
    out += lines[i];
    interpreter.check_size(out.size());
  }
  if (first) out = indentation + out;
  return Value(std::move(out));
}

Value do_items(I&, const Value& v, A& a) {
  BoundArgs("items", a, {});
  return lazily([&] {
    std::vector<Value> pairs;
    if (v.is_undefined()) return pairs;
    const Dict* dict = v.dict();
    if (dict == nullptr) throw Error("Can only get item pairs from a mapping.");
    for (const auto& [key, value] : dict->entries) pairs.push_back(Value::list({Value(key), value}, SequenceKind::Tuple));
    return pairs;
  });
}

Value do_join(I& interpreter, const Value& v, A& a) {
  BoundArgs args("join", a, {"d", "attribute"});
  const std::string separator = args.has(0) ? args[0].str() : "";
  const std::vector<Value> path = args.has(1) ? attribute_path(args[1]) : std::vector<Value>{};
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += separator;
    first = false;
    out += look_up(item, path).str();
    interpreter.check_size(out.size());
  }
  return Value(std::move(out));
}

Value do_length(I&, const Value& v, A& a) {
  BoundArgs("length", a, {});
  return Value(length(v));
}

Value do_list(I&, const Value& v, A& a) {
  BoundArgs("list", a, {});
  return Value::list(iterate(v));
}

// map(attribute=..., default=...) or map('filter', args...).
Value do_map(I& interpreter, const Value& v, A& a) {
  return lazily([&] {
    std::vector<Value> results;
    if (!v.truthy()) return results;
    const bool by_attribute = a.positional.empty() && std::any_of(a.keyword.begin(), a.keyword.end(), [](const auto& kw) {
      return kw.first == "attribute";
    });
    if (by_attribute) {
      BoundArgs args("map", a, {"attribute", "default"});
      const std::vector<Value> path = attribute_path(args[0]);
      const Value fallback = args.get(1, Value());
      for (const Value& item : iterate(v)) results.push_back(look_up(item, path, fallback.is_none() ? nullptr : &fallback));
      return results;
    }
    if (a.positional.empty()) throw Error("map requires a filter argument");
    const std::string name = to_string_arg("map", a.positional.front());
    for (const Value& item : iterate(v)) {
      CallArgs args{{a.positional.begin() + 1, a.positional.end()}, a.keyword};
      results.push_back(call_filter(interpreter, name, item, args));
    }
    return results;
  });
}

// select, reject, selectattr and rejectattr: items whose test (or truth) is `keep`.
Value select_items(I& interpreter, const Value& v, A& a, bool keep, bool by_attribute) {
  return lazily([&] {
    std::vector<Value> kept;
    if (!v.truthy()) return kept;
    size_t next = 0;
    std::vector<Value> path;
    if (by_attribute) {
      if (a.positional.empty()) throw Error("Missing parameter for attribute name");
      path = attribute_path(a.positional[next++]);
    }
    std::optional<std::string> test;
    if (next < a.positional.size()) test = to_string_arg("select", a.positional[next++]);
    for (const Value& item : iterate(v)) {
      const Value subject = look_up(item, path);
      bool passed;
      if (test) {
        CallArgs args{{a.positional.begin() + static_cast<std::ptrdiff_t>(next), a.positional.end()}, a.keyword};
        passed = call_test(interpreter, *test, subject, args);
      } else {
        passed = subject.truthy();
      }
      if (passed == keep) kept.push_back(item);
    }
    return kept;
  });
}

Value do_select(I& in, const Value& v, A& a) { return select_items(in, v, a, true, false); }
Value do_reject(I& in, const Value& v, A& a) { return select_items(in, v, a, false, false); }
Value do_selectattr(I& in, const Value& v, A& a) { return select_items(in, v, a, true, true); }
Value do_rejectattr(I& in, const Value& v, A& a) { return select_items(in, v, a, false, true); }

// min and max: the first smallest (largest) item.
Value extreme(const Value& v, A& a, std::string_view name, bool largest) {
  BoundArgs args(name, a, {"case_sensitive", "attribute"});
  const bool case_sensitive = args.has(0) && args[0].truthy();
  const std::vector<Value> path = args.has(1) ? attribute_path(args[1]) : std::vector<Value>{};
  auto key = [&](const Value& item) {
    const Value k = look_up(item, path);
    return case_sensitive ? k : ignore_case(k);
  };
  const std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (largest ? less(best_key, k) : less(k, best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Value do_min(I&, const Value& v, A& a) { return extreme(v, a, "min", false); }
Value do_max(I&, const Value& v, A& a) { return extreme(v, a, "max", true); }

Value do_replace(I& interpreter, const Value& v, A& a) {
  BoundArgs args("replace", a, {"old", "new", "count"}, 2);
  const int64_t count = args.given(2) ? to_integer("replace", args[2]) : -1;
  std::string out = py::replace(v.str(), args[0].str(), args[1].str(), count);
  interpreter.check_size(out.size());
  return Value(std::move(out));
}

Value do_reverse(I&, const Value& v, A& a) {
  BoundArgs("reverse", a, {});
  if (v.is_string()) {
    std::u32string text = py::decode(v.string());
    std::reverse(text.begin(), text.end());
    return Value(py::encode(text));
  }
  const bool generator = v.is<std::shared_ptr<Generator>>();
  if (!generator && !v.is_undefined() && v.list() == nullptr && v.dict() == nullptr) {
    throw Error("argument must be iterable");
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  // reversed() of a sequence is an iterator; a generator is listed first, then reversed.
  return generator ? Value::list(std::move(items)) : make_generator(std::move(items));
}

Value do_round(I&, const Value& v, A& a) {
  BoundArgs args("round", a, {"precision", "method"});
  const int64_t precision = args.has(0) ? to_integer("round", args[0]) : 0;
  const std::string method = args.has(1) ? to_string_arg("round", args[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    throw Error("method must be common, ceil or floor");
  }
  fail_if_undefined(v);
  if (!v.is_number()) throw Error("round: a number is required, not '" + v.type_name() + "'");
  if (method == "common") {
    if (v.is<double>()) return Value(py::round_float(v.as<double>(), precision));
    if (precision >= 0) return Value(v.integer());
    // round(int, -n): to a multiple of 10**n, ties to even.
    const double rounded = py::round_float(static_cast<double>(v.integer()), precision);
    return Value(static_cast<int64_t>(rounded));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.number() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value do_sort(I&, const Value& v, A& a) {
  BoundArgs args("sort", a, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = args.has(0) && to_integer("sort", args[0]) != 0;  // sorted() needs an int
  const bool case_sensitive = args.has(1) && args[1].truthy();
  // "a,b.c": several keys, compared in turn.
  std::vector<std::vector<Value>> paths;
  if (args.given(2) && args[2].is_string()) {
    for (const std::string& part : py::split(args[2].string(), std::string(","), -1, false)) {
      paths.push_back(attribute_path(Value(part)));
    }
  } else {
    paths.push_back(args.given(2) ? attribute_path(args[2]) : std::vector<Value>{});
  }
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : iterate(v)) {
    std::vector<Value> keys;
    for (const auto& path : paths) {
      const Value k = look_up(item, path);
      keys.push_back(case_sensitive ? k : ignore_case(k));
    }
    keyed.emplace_back(Value::list(std::move(keys)), std::move(item));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less(y.first, x.first) : less(x.first, y.first);
  });
  std::vector<Value> items;
  for (auto& entry : keyed) items.push_back(std::move(entry.second));
  return Value::list(std::move(items));
}

Value do_sum(I&, const Value& v, A& a) {
  BoundArgs args("sum", a, {"attribute", "start"});
  const std::vector<Value> path = args.given(0) ? attribute_path(args[0]) : std::vector<Value>{};
  Value total = args.get(1, Value(int64_t{0}));
  for (const Value& item : iterate(v)) {
    total = arithmetic(BinaryOp::Add, total, look_up(item, path), SIZE_MAX);
  }
  return total;
}

// jinja2's title: words start after '-', whitespace or an opening bracket.
std::string jinja_title(std::string_view text) {
  std::string out;
  bool word_start = true;
  for (const char32_t c : py::decode(text)) {
    std::string one;
    py::append_utf8(one, c);
    const bool separator = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py::is_space(c);
    out += separator ? one : word_start ? py::upper(one) : py::lower(one);
    word_start = separator;
  }
  return out;
}

Value do_tojson(I& interpreter, const Value& v, A& a) {
  BoundArgs args("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonFormat format;
  format.ensure_ascii = args.has(0) && args[0].truthy();
  if (args.given(1)) {
    const Value& indent = args[1];
    if (indent.is_string()) {
      format.indent = indent.string();
    } else if (indent.is_integer()) {
      format.indent = std::string(std::clamp<int64_t>(indent.integer(), 0, 1 << 10), ' ');
    } else {
      throw Error("tojson: indent must be an integer or a string");
    }
    format.item_separator = ",";
  }
  if (args.given(2)) {
    const List* separators = args[2].list();
    if (separators == nullptr || separators->items.size() != 2 || !separators->items[0].is_string() ||
        !separators->items[1].is_string()) {
      throw Error("tojson: separators must be a pair of strings");
    }
    format.item_separator = separators->items[0].string();
    format.key_separator = separators->items[1].string();
  }
  format.sort_keys = args.has(3) && args[3].truthy();
  std::string out = dumps(v, format);
  interpreter.check_size(out.size());
  return Value(std::move(out));
}

Value do_trim(I&, const Value& v, A& a) {
  BoundArgs args("trim", a, {"chars"});
  std::optional<std::string> chars;
  if (args.given(0)) chars = to_string_arg("trim", args[0]);
  return Value(py::strip(v.str(), chars, true, true));
}

Value do_truncate(I&, const Value& v, A& a) {
  BoundArgs args("truncate", a, {"length", "killwords", "end", "leeway"});
  const int64_t max_length = args.has(0) ? to_integer("truncate", args[0]) : 255;
  const bool killwords = args.has(1) && args[1].truthy();
  const std::string end = args.has(2) ? to_string_arg("truncate", args[2]) : "...";
  const int64_t leeway = args.given(3) ? to_integer("truncate", args[3]) : 5;
  const auto end_length = static_cast<int64_t>(py::length(end));
  if (max_length < end_length) throw Error("expected length >= " + std::to_string(end_length));
  if (leeway < 0) throw Error("expected leeway >= 0");
  // jinja2 measures the value itself: a short list comes back as it is, other non-strings fail.
  if (!v.is_string()) {
    if ((v.list() != nullptr || v.dict() != nullptr || v.is_undefined()) && length(v) <= max_length + leeway) return v;
    throw Error("truncate: a string is required, not '" + v.type_name() + "'");
  }
  const std::u32string text = py::decode(v.string());
  if (static_cast<int64_t>(text.size()) <= max_length + leeway) return v;
  const std::string head = py::encode(text.substr(0, max_length - end_length));
  if (killwords) return Value(head + end);
  return Value(py::split(head, std::string(" "), 1, true).front() + end);
}

Value do_unique(I&, const Value& v, A& a) {
  BoundArgs args("unique", a, {"case_sensitive", "attribute"});
  return lazily([&] {
    const bool case_sensitive = args.has(0) && args[0].truthy();
    const std::vector<Value> path = args.given(1) ? attribute_path(args[1]) : std::vector<Value>{};
    std::vector<Value> seen, kept;
    for (Value& item : iterate(v)) {
      Value key = look_up(item, path);
      if (!case_sensitive) key = ignore_case(key);
      if (!hashable(key)) throw Error("unhashable type: '" + key.type_name() + "'");
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) {
        seen.push_back(std::move(key));
        kept.push_back(std::move(item));
      }
    }
    return kept;
  });
}

Value do_wordcount(I&, const Value& v, A& a) {
  BoundArgs("wordcount", a, {});
  int64_t words = 0;
  bool in_word = false;
  for (const char32_t c : py::decode(v.str())) {
    const bool word_char = c == '_' || py::is_letter(c) || py::is_numeric(c);
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value(words);
}

struct FilterEntry {
  std::string_view name;
  FilterFn function;
};

const FilterEntry kFilters[] = {
    {"abs", do_abs},
    {"attr", do_attr},
    {"batch", do_batch},
    {"capitalize", [](I&, const Value& v, A& a) { return string_filter(v, py::capitalize, a, "capitalize"); }},
    {"center", do_center},
    {"count", do_length},
    {"d", do_default},
    {"default", do_default},
    {"dictsort", do_dictsort},
    {"e", do_escape},
    {"escape", do_escape},
    {"first", do_first},
    {"float", do_float},
    {"forceescape", do_escape},
    {"format", do_format},
    {"indent", do_indent},
    {"int", do_int},
    {"items", do_items},
    {"join", do_join},
    {"last", do_last},
    {"length", do_length},
    {"list", do_list},
    {"lower", [](I&, const Value& v, A& a) { return string_filter(v, py::lower, a, "lower"); }},
    {"map", do_map},
    {"max", do_max},
    {"min", do_min},
    {"reject", do_reject},
    {"rejectattr", do_rejectattr},
    {"replace", do_replace},
    {"reverse", do_reverse},
    {"round", do_round},
    {"safe", [](I&, const Value& v, A& a) { BoundArgs("safe", a, {}); return Value(v.str()); }},
    {"select", do_select},
    {"selectattr", do_selectattr},
    {"sort", do_sort},
    {"string", [](I&, const Value& v, A& a) { BoundArgs("string", a, {}); return Value(v.str()); }},
    {"sum", do_sum},
    {"title", [](I&, const Value& v, A& a) { return string_filter(v, jinja_title, a, "title"); }},
    {"tojson", do_tojson},
    {"trim", do_trim},
    {"truncate", do_truncate},
    {"unique", do_unique},
    {"upper", [](I&, const Value& v, A& a) { return string_filter(v, py::upper, a, "upper"); }},
    {"wordcount", do_wordcount},
};

// jinja2 filters that ditto leaves out: HTML helpers, randomness, pretty-printing.
constexpr std::string_view kUnsupportedFilters[] = {"filesizeformat", "groupby", "pprint", "random",
                                                    "slice", "striptags", "urlencode", "urlize",
                                                    "wordwrap", "xmlattr"};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const FilterEntry& entry : kFilters) {
    if (entry.name == name) return entry.function;
  }
  return nullptr;
}

bool is_unsupported_filter(std::string_view name) {
  return std::find(std::begin(kUnsupportedFilters), std::end(kUnsupportedFilters), name) !=
         std::end(kUnsupportedFilters);
}

Value call_filter(Interpreter& interpreter, std::string_view name, const Value& input, CallArgs& args) {
  const FilterFn function = find_filter(name);
  if (function == nullptr) throw Error("no filter named '" + std::string(name) + "'");
  return function(interpreter, input, args);
}

}  // namespace ditto::jinja
