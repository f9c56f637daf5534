// Attributes and methods: what `x.name` finds on strings, dicts, lists, namespaces and loops.
#include <algorithm>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/operations.h"
#include "chat/py_text.h"
#include "ditto/error.h"

namespace ditto::jinja {

namespace {

using Method = Value (*)(Interpreter&, const Value& self, CallArgs& args);

Value bind(std::string name, const Value& self, Method method) {
  auto callable = std::make_shared<const Callable>(Callable{
      Callable::Kind::Method, name,
      [self, method](Interpreter& interpreter, CallArgs& args) { return method(interpreter, self, args); },
      depth_above({self})});
  return Value(Value::Data(std::move(callable)));
}

std::optional<std::string> optional_string(std::string_view function, const BoundArgs& args, size_t i) {
  if (!args.given(i)) return std::nullopt;
  return to_string_arg(function, args[i]);
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& part : parts) items.emplace_back(std::move(part));
  return Value::list(std::move(items));
}

// startswith / endswith take a string or a tuple of strings.
Value affix_test(std::string_view function, const Value& self, CallArgs& call, bool prefix) {
  BoundArgs args(function, call, {"affix"}, 1);
  std::vector<Value> candidates;
  if (const List* list = args[0].list(); list != nullptr && list->kind == SequenceKind::Tuple) {
    candidates = list->items;
  } else {
    candidates.push_back(args[0]);
  }
  const std::string& text = self.string();
  for (const Value& candidate : candidates) {
    const std::string affix = to_string_arg(function, candidate);
    if (prefix ? text.starts_with(affix) : text.ends_with(affix)) return Value(true);
  }
  return Value(false);
}

Value strip_method(std::string_view function, const Value& self, CallArgs& call, bool left, bool right) {
  BoundArgs args(function, call, {"chars"});
  return Value(py::strip(self.string(), optional_string(function, args, 0), left, right));
}

Value split_method(std::string_view function, const Value& self, CallArgs& call, bool from_right) {
  BoundArgs args(function, call, {"sep", "maxsplit"});
  const int64_t max_split = args.has(1) ? to_integer(function, args[1]) : -1;
  return string_list(py::split(self.string(), optional_string(function, args, 0), max_split, from_right));
}

Value find_method(std::string_view function, const Value& self, CallArgs& call, bool from_right,
                  bool must_find) {
  BoundArgs args(function, call, {"sub"}, 1);
  const int64_t at = py::find(self.string(), to_string_arg(function, args[0]), from_right);
  if (must_find && at < 0) throw Error("substring not found");
  return Value(at);
}

// str.ljust / rjust / center / zfill.
Value justify(std::string_view function, const Value& self, CallArgs& call, char how) {
  BoundArgs args(function, call, {"width", "fillchar"}, 1);
  const int64_t width = std::min<int64_t>(to_integer(function, args[0]), 1 << 20);
  const std::string fill = args.has(1) ? to_string_arg(function, args[1]) : " ";
  if (py::length(fill) != 1) throw Error(std::string(function) + ": the fill character must be one character");
  const std::string& text = self.string();
  const auto n = static_cast<int64_t>(py::length(text));
  if (width <= n) return self;
  const int64_t margin = width - n;
  int64_t left = how == 'l' ? 0 : how == 'r' || how == 'z' ? margin : margin / 2 + (margin & width & 1);
  auto repeat = [&](int64_t count) {
    std::string s;
    for (int64_t i = 0; i < count; ++i) s += how == 'z' ? "0" : fill;
    return s;
  };
  if (how == 'z' && (text.starts_with('-') || text.starts_with('+'))) {
    return Value(text.substr(0, 1) + repeat(left) + text.substr(1));
  }
  return Value(repeat(left) + text + repeat(margin - left));
}

// str.format with automatic ({}), numbered ({0}) and named ({name}) fields, and !s / !r.
Value format_method(Interpreter& interpreter, const Value& self, CallArgs& args) {
  const std::string& format = self.string();
  std::string out;
  size_t automatic = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') ++i;
      else throw Error("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string::npos) throw Error("Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 's';
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size() || (field[bang + 1] != 's' && field[bang + 1] != 'r')) {
        throw Error("str.format: unsupported conversion in '{" + field + "}'");
      }
      conversion = field[bang + 1];
      field.resize(bang);
    }
    if (field.find_first_of(":.[") != std::string::npos) {
      throw Error("str.format: format specs and field attributes are not supported ('{" + field + "}')");
    }
    const Value* value = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t index = field.empty() ? automatic++ : std::stoul(field.substr(0, 9));
      if (index >= args.positional.size()) throw Error("Replacement index " + std::to_string(index) + " out of range");
      value = &args.positional[index];
    } else {
      for (const auto& [key, v] : args.keyword) {
        if (key == field) value = &v;
      }
      if (value == nullptr) throw Error("KeyError: '" + field + "'");
    }
    out += conversion == 'r' ? value->repr() : value->str();
    interpreter.check_size(out.size());
  }
  return Value(std::move(out));
}

Value string_method(const Value& self, const std::string& name) {
  using I = Interpreter;
  using A = CallArgs;
  static const std::vector<std::pair<std::string_view, Method>> kMethods = {
      {"startswith", [](I&, const Value& s, A& a) { return affix_test("startswith", s, a, true); }},
      {"endswith", [](I&, const Value& s, A& a) { return affix_test("endswith", s, a, false); }},
      {"strip", [](I&, const Value& s, A& a) { return strip_method("strip", s, a, true, true); }},
      {"lstrip", [](I&, const Value& s, A& a) { return strip_method("lstrip", s, a, true, false); }},
      {"rstrip", [](I&, const Value& s, A& a) { return strip_method("rstrip", s, a, false, true); }},
      {"split", [](I&, const Value& s, A& a) { return split_method("split", s, a, false); }},
      {"rsplit", [](I&, const Value& s, A& a) { return split_method("rsplit", s, a, true); }},
      {"find", [](I&, const Value& s, A& a) { return find_method("find", s, a, false, false); }},
      {"rfind", [](I&, const Value& s, A& a) { return find_method("rfind", s, a, true, false); }},
      {"index", [](I&, const Value& s, A& a) { return find_method("index", s, a, false, true); }},
      {"rindex", [](I&, const Value& s, A& a) { return find_method("rindex", s, a, true, true); }},
      {"ljust", [](I&, const Value& s, A& a) { return justify("ljust", s, a, 'l'); }},
      {"rjust", [](I&, const Value& s, A& a) { return justify("rjust", s, a, 'r'); }},
      {"center", [](I&, const Value& s, A& a) { return justify("center", s, a, 'c'); }},
      {"zfill",
       [](I&, const Value& s, A& a) {
         if (!a.keyword.empty() || a.positional.size() != 1) throw Error("zfill() takes exactly one argument");
         return justify("zfill", s, a, 'z');
       }},
      {"format", format_method},
      {"upper", [](I&, const Value& s, A& a) { BoundArgs("upper", a, {}); return Value(py::upper(s.string())); }},
      {"lower", [](I&, const Value& s, A& a) { BoundArgs("lower", a, {}); return Value(py::lower(s.string())); }},
      {"title", [](I&, const Value& s, A& a) { BoundArgs("title", a, {}); return Value(py::title(s.string())); }},
      {"capitalize",
       [](I&, const Value& s, A& a) { BoundArgs("capitalize", a, {}); return Value(py::capitalize(s.string())); }},
      {"replace",
       [](I& interpreter, const Value& s, A& a) {
         BoundArgs args("replace", a, {"old", "new", "count"}, 2);
         std::string out = py::replace(s.string(), to_string_arg("replace", args[0]),
                                       to_string_arg("replace", args[1]),
                                       args.has(2) ? to_integer("replace", args[2]) : -1);
         interpreter.check_size(out.size());
         return Value(std::move(out));
       }},
      {"count",
       [](I&, const Value& s, A& a) {
         BoundArgs args("count", a, {"sub"}, 1);
         return Value(py::count(s.string(), to_string_arg("count", args[0])));
       }},
      {"join",
       [](I& interpreter, const Value& s, A& a) {
         BoundArgs args("join", a, {"iterable"}, 1);
         std::string out;
         const std::vector<Value> items = iterate(args[0]);
         for (size_t i = 0; i < items.size(); ++i) {
           if (!items[i].is_string()) {
             throw Error("sequence item " + std::to_string(i) + ": expected str instance, " +
                         items[i].type_name() + " found");
           }
           if (i > 0) out += s.string();
           out += items[i].string();
           interpreter.check_size(out.size());
         }
         return Value(std::move(out));
       }},
      {"splitlines",
       [](I&, const Value& s, A& a) {
         BoundArgs args("splitlines", a, {"keepends"});
         return string_list(py::splitlines(s.string(), args.has(0) && args[0].truthy()));
       }},
      {"removeprefix",
       [](I&, const Value& s, A& a) {
         BoundArgs args("removeprefix", a, {"prefix"}, 1);
         const std::string prefix = to_string_arg("removeprefix", args[0]);
         return s.string().starts_with(prefix) ? Value(s.string().substr(prefix.size())) : s;
       }},
      {"removesuffix",
       [](I&, const Value& s, A& a) {
         BoundArgs args("removesuffix", a, {"suffix"}, 1);
         const std::string suffix = to_string_arg("removesuffix", args[0]);
         return s.string().ends_with(suffix) && !suffix.empty()
                    ? Value(s.string().substr(0, s.string().size() - suffix.size()))
                    : s;
       }},
      {"partition",
       [](I&, const Value& s, A& a) {
         BoundArgs args("partition", a, {"sep"}, 1);
         const std::string sep = to_string_arg("partition", args[0]);
         if (sep.empty()) throw Error("empty separator");
         const size_t at = s.string().find(sep);
         if (at == std::string::npos) return Value::list({s, Value(""), Value("")}, SequenceKind::Tuple);
         return Value::list({Value(s.string().substr(0, at)), Value(sep), Value(s.string().substr(at + sep.size()))},
                            SequenceKind::Tuple);
       }},
      {"isspace", [](I&, const Value& s, A& a) {
         BoundArgs("isspace", a, {});
         const std::u32string t = py::decode(s.string());
         return Value(!t.empty() && std::all_of(t.begin(), t.end(), py::is_space));
       }},
      {"isalpha", [](I&, const Value& s, A& a) {
         BoundArgs("isalpha", a, {});
         const std::u32string t = py::decode(s.string());
         return Value(!t.empty() && std::all_of(t.begin(), t.end(), py::is_letter));
       }},
      {"isdigit", [](I&, const Value& s, A& a) {
         BoundArgs("isdigit", a, {});
         const std::u32string t = py::decode(s.string());
         return Value(!t.empty() && std::all_of(t.begin(), t.end(), py::is_decimal));
       }},
      {"isalnum", [](I&, const Value& s, A& a) {
         BoundArgs("isalnum", a, {});
         const std::u32string t = py::decode(s.string());
         return Value(!t.empty() && std::all_of(t.begin(), t.end(), [](char32_t c) {
           return py::is_letter(c) || py::is_numeric(c);
         }));
       }},
      {"islower", [](I&, const Value& s, A& a) {
         BoundArgs("islower", a, {});
         return Value(py::lower(s.string()) == s.string() && py::upper(s.string()) != s.string());
       }},
      {"isupper", [](I&, const Value& s, A& a) {
         BoundArgs("isupper", a, {});
         return Value(py::upper(s.string()) == s.string() && py::lower(s.string()) != s.string());
       }},
  };
  for (const auto& [method_name, method] : kMethods) {
    if (method_name == name) return bind(name, self, method);
  }
  return Value::undefined("'str object' has no attribute '" + name + "'");
}

Value dict_view(const Dict& dict, SequenceKind kind) {
  std::vector<Value> items;
  items.reserve(dict.entries.size());
  for (const auto& [key, value] : dict.entries) {
    if (kind == SequenceKind::Keys) {
      items.emplace_back(key);
    } else if (kind == SequenceKind::Values) {
      items.push_back(value);
    } else {
      items.push_back(Value::list({Value(key), value}, SequenceKind::Tuple));
    }
  }
  return Value::list(std::move(items), kind);
}

// A method of a dict, or null.
std::optional<Value> dict_method(const Value& self, const std::string& name) {
  using I = Interpreter;
  using A = CallArgs;
  static const std::vector<std::pair<std::string_view, Method>> kMethods = {
      {"items", [](I&, const Value& d, A& a) { BoundArgs("items", a, {}); return dict_view(*d.dict(), SequenceKind::Items); }},
      {"keys", [](I&, const Value& d, A& a) { BoundArgs("keys", a, {}); return dict_view(*d.dict(), SequenceKind::Keys); }},
      {"values", [](I&, const Value& d, A& a) { BoundArgs("values", a, {}); return dict_view(*d.dict(), SequenceKind::Values); }},
      {"copy", [](I&, const Value& d, A& a) { BoundArgs("copy", a, {}); return d; }},
      {"get",
       [](I&, const Value& d, A& a) {
         BoundArgs args("get", a, {"key", "default"}, 1);
         const Value* found = args[0].is_string() ? d.dict()->find(args[0].string()) : nullptr;
         return found != nullptr ? *found : args.get(1, Value());
       }},
  };
  for (const auto& [method_name, method] : kMethods) {
    if (method_name == name) return bind(name, self, method);
  }
  return std::nullopt;
}

std::optional<Value> list_method(const Value& self, const std::string& name) {
  using I = Interpreter;
  using A = CallArgs;
  static const std::vector<std::pair<std::string_view, Method>> kMethods = {
      {"count",
       [](I&, const Value& l, A& a) {
         BoundArgs args("count", a, {"value"}, 1);
         const auto& items = l.list()->items;
         return Value(static_cast<int64_t>(
             std::count_if(items.begin(), items.end(), [&](const Value& v) { return equal(v, args[0]); })));
       }},
      {"index",
       [](I&, const Value& l, A& a) {
         BoundArgs args("index", a, {"value"}, 1);
         const auto& items = l.list()->items;
         for (size_t i = 0; i < items.size(); ++i) {
           if (equal(items[i], args[0])) return Value(static_cast<int64_t>(i));
         }
         throw Error(args[0].repr() + " is not in list");
       }},
      {"copy", [](I&, const Value& l, A& a) { BoundArgs("copy", a, {}); return l; }},
  };
  if (self.list()->kind != SequenceKind::List && self.list()->kind != SequenceKind::Tuple) return std::nullopt;
  if (name == "copy" && self.list()->kind == SequenceKind::Tuple) return std::nullopt;
  for (const auto& [method_name, method] : kMethods) {
    if (method_name == name) return bind(name, self, method);
  }
  return std::nullopt;
}

// Methods that change a list or a dict, which jinja2's immutable sandbox refuses to call.
bool modifies(const Value& object, const std::string& name) {
  static constexpr std::string_view kListMethods[] = {"append", "clear", "pop", "reverse", "insert",
                                                      "sort", "extend", "remove"};
  static constexpr std::string_view kDictMethods[] = {"clear", "pop", "popitem", "setdefault", "update"};
  if (object.dict() != nullptr) {
    return std::find(std::begin(kDictMethods), std::end(kDictMethods), name) != std::end(kDictMethods);
  }
  const List* list = object.list();
  return list != nullptr && list->kind == SequenceKind::List &&
         std::find(std::begin(kListMethods), std::end(kListMethods), name) != std::end(kListMethods);
}

}  // namespace

Value get_attribute(const Value& object, const std::string& name, bool attributes_only) {
  // Python's own attributes (__class__ and the like) and the methods that modify.
  if (name.starts_with("__") || modifies(object, name)) {
    return Value::undefined("access to attribute '" + name + "' of '" + object.type_name() +
                            "' object is unsafe.");
  }
  if (object.is_string()) return string_method(object, name);
  if (const Dict* dict = object.dict()) {
    if (auto method = dict_method(object, name)) return *method;
    if (const Value* found = dict->find(name); found != nullptr && !attributes_only) return *found;
  } else if (object.list() != nullptr) {  // dict views have no methods that templates use
    if (auto method = list_method(object, name)) return *method;
  } else if (object.is<std::shared_ptr<Object>>()) {
    if (const Value* found = object.as<std::shared_ptr<Object>>()->attributes.find(name)) return *found;
  }
  return Value::undefined("'" + object.type_name() + " object' has no attribute '" + name + "'");
}

}  // namespace ditto::jinja
