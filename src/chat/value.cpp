#include "chat/value.h"

#include <algorithm>
#include <cmath>

#include "chat/py_text.h"
#include "ditto/error.h"
#include "tokenizer/utf8.h"

namespace ditto::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  for (auto& [k, v] : entries) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

int depth_above(const std::vector<Value>& items) {
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.depth());
  if (deepest >= kMaxValueDepth) {
    throw Error("a value nests more than " + std::to_string(kMaxValueDepth) + " levels deep");
  }
  return deepest + 1;
}

Value::Value(List list) {
  list.depth = depth_above(list.items);
  data_ = std::make_shared<const List>(std::move(list));
}

Value::Value(Dict dict) {
  int deepest = 0;
  for (const auto& entry : dict.entries) deepest = std::max(deepest, entry.second.depth());
  if (deepest >= kMaxValueDepth) {
    throw Error("a value nests more than " + std::to_string(kMaxValueDepth) + " levels deep");
  }
  dict.depth = deepest + 1;
  data_ = std::make_shared<const Dict>(std::move(dict));
}

int Value::depth() const {
  if (const List* l = list()) return l->depth;
  if (const Dict* d = dict()) return d->depth;
  if (is<std::shared_ptr<Generator>>()) return as<std::shared_ptr<Generator>>()->depth;
  if (is<std::shared_ptr<Object>>()) return as<std::shared_ptr<Object>>()->depth;
  if (is<std::shared_ptr<const Callable>>()) return as<std::shared_ptr<const Callable>>()->depth;
  return 0;
}

const List* Value::list() const {
  return is<std::shared_ptr<const List>>() ? as<std::shared_ptr<const List>>().get() : nullptr;
}

const Dict* Value::dict() const {
  return is<std::shared_ptr<const Dict>>() ? as<std::shared_ptr<const Dict>>().get() : nullptr;
}

bool Value::truthy() const {
  struct Visitor {
    bool operator()(const Undefined&) const { return false; }
    bool operator()(const None&) const { return false; }
    bool operator()(bool b) const { return b; }
    bool operator()(int64_t i) const { return i != 0; }
    bool operator()(double d) const { return d != 0; }
    bool operator()(const std::string& s) const { return !s.empty(); }
    bool operator()(const std::shared_ptr<const List>& l) const { return !l->items.empty(); }
    bool operator()(const std::shared_ptr<const Dict>& d) const { return !d->entries.empty(); }
    bool operator()(const std::shared_ptr<Generator>&) const { return true; }
    bool operator()(const std::shared_ptr<Object>&) const { return true; }
    bool operator()(const std::shared_ptr<const Callable>&) const { return true; }
  };
  return std::visit(Visitor{}, data_);
}

std::string Value::type_name() const {
  struct Visitor {
    std::string operator()(const Undefined&) const { return "Undefined"; }
    std::string operator()(const None&) const { return "NoneType"; }
    std::string operator()(bool) const { return "bool"; }
    std::string operator()(int64_t) const { return "int"; }
    std::string operator()(double) const { return "float"; }
    std::string operator()(const std::string&) const { return "str"; }
    std::string operator()(const std::shared_ptr<const List>& l) const {
      switch (l->kind) {
        case SequenceKind::Tuple: return "tuple";
        case SequenceKind::Keys: return "dict_keys";
        case SequenceKind::Values: return "dict_values";
        case SequenceKind::Items: return "dict_items";
        case SequenceKind::List: break;
      }
      return "list";
    }
    std::string operator()(const std::shared_ptr<const Dict>&) const { return "dict"; }
    std::string operator()(const std::shared_ptr<Generator>&) const { return "generator"; }
    std::string operator()(const std::shared_ptr<Object>& o) const {
      return o->kind == Object::Kind::Namespace ? "Namespace" : "LoopContext";
    }
    std::string operator()(const std::shared_ptr<const Callable>& c) const {
      return c->kind == Callable::Kind::Macro ? "Macro" : "builtin_function_or_method";
    }
  };
  return std::visit(Visitor{}, data_);
}

namespace {

std::string repr_at(const Value& value, int depth);

std::string join_repr(const std::vector<Value>& items, int depth) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += repr_at(items[i], depth);
  }
  return out;
}

std::string dict_repr(const Dict& dict, int depth) {
  std::string out = "{";
  for (size_t i = 0; i < dict.entries.size(); ++i) {
    if (i > 0) out += ", ";
    out += py::repr(dict.entries[i].first) + ": " + repr_at(dict.entries[i].second, depth);
  }
  return out + "}";
}

std::string list_repr(const List& list, int depth) {
  switch (list.kind) {
    case SequenceKind::Tuple:
      return "(" + join_repr(list.items, depth) + (list.items.size() == 1 ? ",)" : ")");
    case SequenceKind::Keys: return "dict_keys([" + join_repr(list.items, depth) + "])";
    case SequenceKind::Values: return "dict_values([" + join_repr(list.items, depth) + "])";
    case SequenceKind::Items: return "dict_items([" + join_repr(list.items, depth) + "])";
    case SequenceKind::List: break;
  }
  return "[" + join_repr(list.items, depth) + "]";
}

// `depth` counts the containers around the value: a namespace can hold itself.
std::string repr_at(const Value& value, int depth) {
  if (depth > 2 * kMaxValueDepth) throw Error("a value nests too deeply to print (a namespace that holds itself?)");
  struct Visitor {
    int depth;
    std::string operator()(const Undefined&) const { return "Undefined"; }
    std::string operator()(const None&) const { return "None"; }
    std::string operator()(bool b) const { return b ? "True" : "False"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return py::float_repr(d); }
    std::string operator()(const std::string& s) const { return py::repr(s); }
    std::string operator()(const std::shared_ptr<const List>& l) const { return list_repr(*l, depth + 1); }
    std::string operator()(const std::shared_ptr<const Dict>& d) const { return dict_repr(*d, depth + 1); }
    std::string operator()(const std::shared_ptr<Generator>&) const { return "<generator object>"; }
    std::string operator()(const std::shared_ptr<Object>& o) const {
      if (o->kind == Object::Kind::Namespace) return "<Namespace " + dict_repr(o->attributes, depth + 1) + ">";
      const Value* index = o->attributes.find("index");
      const Value* length = o->attributes.find("length");
      return "<LoopContext " + index->str() + "/" + length->str() + ">";
    }
    std::string operator()(const std::shared_ptr<const Callable>& c) const {
      if (c->kind == Callable::Kind::Macro) return "<Macro '" + c->name + "'>";
      return "<built-in " + std::string(c->kind == Callable::Kind::Method ? "method" : "function") +
             " " + c->name + ">";
    }
  };
  return std::visit(Visitor{depth}, value.data());
}

}  // namespace

std::string Value::str() const {
  if (is_undefined()) return "";
  if (is_string()) return string();
  return repr();
}

std::string Value::repr() const { return repr_at(*this, 0); }

namespace {

// Compares an int with a float exactly, as Python does: -1, 0 or 1 (NaN compares as unordered,
// reported as 2).
int compare_int_float(int64_t i, double d) {
  if (std::isnan(d)) return 2;
  constexpr double two_to_63 = 9223372036854775808.0;
  if (d >= two_to_63) return -1;
  if (d < -two_to_63) return 1;
  const double whole = std::floor(d);
  const auto whole_int = static_cast<int64_t>(whole);
  if (i != whole_int) return i < whole_int ? -1 : 1;
  return whole == d ? 0 : -1;
}

// -1, 0, 1, or 2 for unordered (NaN).
int compare_numbers(const Value& a, const Value& b) {
  if (a.is_integer() && b.is_integer()) {
    return a.integer() < b.integer() ? -1 : a.integer() > b.integer() ? 1 : 0;
  }
  if (a.is_integer()) return compare_int_float(a.integer(), b.as<double>());
  if (b.is_integer()) {
    const int c = compare_int_float(b.integer(), a.as<double>());
    return c == 2 ? 2 : -c;
  }
  const double x = a.as<double>(), y = b.as<double>();
  if (std::isnan(x) || std::isnan(y)) return 2;
  return x < y ? -1 : x > y ? 1 : 0;
}

}  // namespace

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == 0;
  if (a.data().index() != b.data().index()) return false;
  struct Visitor {
    const Value& other;
    bool operator()(const Undefined&) const { return true; }
    bool operator()(const None&) const { return true; }
    bool operator()(bool) const { return false; }  // numbers are handled above
    bool operator()(int64_t) const { return false; }
    bool operator()(double) const { return false; }
    bool operator()(const std::string& s) const { return s == other.string(); }
    bool operator()(const std::shared_ptr<const List>& l) const {
      const List& m = *other.as<std::shared_ptr<const List>>();
      const bool l_tuple = l->kind == SequenceKind::Tuple, m_tuple = m.kind == SequenceKind::Tuple;
      if (l_tuple != m_tuple || l->items.size() != m.items.size()) return false;
      for (size_t i = 0; i < l->items.size(); ++i) {
        if (!equal(l->items[i], m.items[i])) return false;
      }
      return true;
    }
    bool operator()(const std::shared_ptr<const Dict>& d) const {
      const Dict& e = *other.as<std::shared_ptr<const Dict>>();
      if (d->entries.size() != e.entries.size()) return false;
      for (const auto& [key, value] : d->entries) {
        const Value* found = e.find(key);
        if (found == nullptr || !equal(value, *found)) return false;
      }
      return true;
    }
    bool operator()(const std::shared_ptr<Generator>& g) const {
      return g == other.as<std::shared_ptr<Generator>>();
    }
    bool operator()(const std::shared_ptr<Object>& o) const {
      return o == other.as<std::shared_ptr<Object>>();
    }
    bool operator()(const std::shared_ptr<const Callable>& c) const {
      return c == other.as<std::shared_ptr<const Callable>>();
    }
  };
  return std::visit(Visitor{b}, a.data());
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == -1;
  if (a.is_string() && b.is_string()) return a.string() < b.string();  // UTF-8 orders by code point
  const List* l = a.list();
  const List* m = b.list();
  if (l != nullptr && m != nullptr && (l->kind == SequenceKind::Tuple) == (m->kind == SequenceKind::Tuple)) {
    for (size_t i = 0; i < l->items.size() && i < m->items.size(); ++i) {
      if (!equal(l->items[i], m->items[i])) return less(l->items[i], m->items[i]);
    }
    return l->items.size() < m->items.size();
  }
  throw Error("'<' not supported between instances of '" + a.type_name() + "' and '" +
              b.type_name() + "'");
}

namespace {

const std::string& valid_utf8(const std::string& s) {
  const size_t bad = utf8::find_invalid(s);
  if (bad != std::string::npos) {
    throw Error("a string in the chat template's input is not valid UTF-8 (byte " +
                std::to_string(bad) + ")");
  }
  return s;
}

}  // namespace

Value from_json(const nlohmann::ordered_json& json, int depth) {
  if (depth > kMaxValueDepth) {
    throw Error("the chat template's input nests more than " + std::to_string(kMaxValueDepth) + " levels deep");
  }
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        throw Error("integer " + std::to_string(u) + " is too large for a chat template");
      }
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(valid_utf8(json.get_ref<const std::string&>()));
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json(item, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      dict.entries.reserve(json.size());
      for (const auto& [key, item] : json.items()) {
        dict.entries.emplace_back(valid_utf8(key), from_json(item, depth + 1));
      }
      return Value(std::move(dict));
    }
    default:
      throw Error("binary data cannot be passed to a chat template");
  }
}

}  // namespace ditto::jinja
