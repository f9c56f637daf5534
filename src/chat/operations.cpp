#include "chat/operations.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "chat/py_text.h"
#include "ditto/error.h"

namespace ditto::jinja {

namespace {

[[noreturn]] void fail_operands(std::string_view symbol, const Value& a, const Value& b) {
  throw Error("unsupported operand type(s) for " + std::string(symbol) + ": '" + a.type_name() +
              "' and '" + b.type_name() + "'");
}

[[noreturn]] void fail_overflow() {
  throw Error("integer overflow (ditto's template integers are 64-bit)");
}

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail_overflow();
  return r;
}

int64_t checked_sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) fail_overflow();
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail_overflow();
  return r;
}

void check_size(size_t bytes, size_t max_bytes) {
  if (bytes > max_bytes) {
    throw Error("the template builds a value of more than " + std::to_string(max_bytes) + " bytes");
  }
}

const char* symbol_of(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Subtract: return "-";
    case BinaryOp::Multiply: return "*";
    case BinaryOp::Divide: return "/";
    case BinaryOp::FloorDivide: return "//";
    case BinaryOp::Modulo: return "%";
    case BinaryOp::Power: return "** or pow()";
    default: return "?";
  }
}

// CPython's float_divmod: the floor quotient and the modulo with the divisor's sign.
std::pair<double, double> float_divmod(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floor_div;
  if (div != 0) {
    floor_div = std::floor(div);
    if (div - floor_div > 0.5) floor_div += 1.0;
  } else {
    floor_div = std::copysign(0.0, x / y);
  }
  return {floor_div, mod};
}

Value repeat(const Value& sequence, int64_t times, size_t max_bytes) {
  if (times < 0) times = 0;
  if (sequence.is_string()) {
    const std::string& s = sequence.string();
    if (!s.empty() && static_cast<uint64_t>(times) > max_bytes / s.size()) check_size(max_bytes + 1, max_bytes);
    std::string out;
    out.reserve(s.size() * times);
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value(std::move(out));
  }
  const List& list = *sequence.list();
  if (!list.items.empty() && static_cast<uint64_t>(times) > max_bytes / (list.items.size() * sizeof(Value))) {
    check_size(max_bytes + 1, max_bytes);
  }
  std::vector<Value> items;
  for (int64_t i = 0; i < times; ++i) items.insert(items.end(), list.items.begin(), list.items.end());
  return Value::list(std::move(items), list.kind);
}

bool is_sequence(const Value& v) {
  const List* list = v.list();
  return list != nullptr && (list->kind == SequenceKind::List || list->kind == SequenceKind::Tuple);
}

Value add(const Value& a, const Value& b, size_t max_bytes) {
  if (a.is_integer() && b.is_integer()) {
    return Value(checked_add(a.integer(), b.integer()));
  }
  if (a.is_number() && b.is_number()) return Value(a.number() + b.number());
  if (a.is_string()) {
    if (!b.is_string()) {
      throw Error("can only concatenate str (not \"" + b.type_name() + "\") to str");
    }
    check_size(a.string().size() + b.string().size(), max_bytes);
    return Value(a.string() + b.string());
  }
  if (is_sequence(a)) {
    const List& l = *a.list();
    if (!is_sequence(b) || b.list()->kind != l.kind) {
      throw Error("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " +
                  a.type_name());
    }
    std::vector<Value> items = l.items;
    items.insert(items.end(), b.list()->items.begin(), b.list()->items.end());
    return Value::list(std::move(items), l.kind);
  }
  fail_operands("+", a, b);
}

Value power(const Value& a, const Value& b) {
  if (a.is_integer() && b.is_integer() && b.integer() >= 0) {
    int64_t result = 1, base = a.integer();
    for (int64_t e = b.integer(); e > 0; e >>= 1) {
      if (e & 1) result = checked_mul(result, base);
      if (e > 1) base = checked_mul(base, base);
    }
    return Value(result);
  }
  const double x = a.number(), y = b.number();
  if (x == 0 && y < 0) throw Error("0.0 cannot be raised to a negative power");
  if (x < 0 && y != std::floor(y)) throw Error("a negative number to a fractional power is complex");
  const double r = std::pow(x, y);
  if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) throw Error("numerical result out of range");
  return Value(r);
}

}  // namespace

bool hashable(const Value& value) {
  if (value.dict() != nullptr) return false;
  const List* list = value.list();
  if (list == nullptr) return true;
  return list->kind == SequenceKind::Tuple && std::all_of(list->items.begin(), list->items.end(), hashable);
}

Generator& consume(const Value& generator) {
  Generator& g = *generator.as<std::shared_ptr<Generator>>();
  if (!g.error.empty()) throw Error(g.error);
  return g;
}

void fail_if_undefined(const Value& value) {
  if (value.is_undefined()) throw Error(value.as<Undefined>().reason);
}

Value arithmetic(BinaryOp op, const Value& a, const Value& b, size_t max_bytes) {
  fail_if_undefined(a);
  if (op == BinaryOp::Modulo && a.is_string()) return Value(percent_format(a.string(), b));
  fail_if_undefined(b);
  if (op == BinaryOp::Add) return add(a, b, max_bytes);
  if (op == BinaryOp::Multiply) {
    if ((a.is_string() || is_sequence(a)) && b.is_integer()) return repeat(a, b.integer(), max_bytes);
    if (a.is_integer() && (b.is_string() || is_sequence(b))) return repeat(b, a.integer(), max_bytes);
  }
  if (!a.is_number() || !b.is_number()) fail_operands(symbol_of(op), a, b);
  const bool integers = a.is_integer() && b.is_integer();
  switch (op) {
    case BinaryOp::Subtract: {
      if (!integers) return Value(a.number() - b.number());
      return Value(checked_sub(a.integer(), b.integer()));
    }
    case BinaryOp::Multiply: {
      if (!integers) return Value(a.number() * b.number());
      return Value(checked_mul(a.integer(), b.integer()));
    }
    case BinaryOp::Divide:
      if (b.number() == 0) throw Error("division by zero");
      return Value(a.number() / b.number());
    case BinaryOp::FloorDivide:
    case BinaryOp::Modulo: {
      if (b.number() == 0) throw Error(op == BinaryOp::Modulo ? "modulo by zero" : "division by zero");
      if (integers) {
        const int64_t x = a.integer(), y = b.integer();
        if (x == std::numeric_limits<int64_t>::min() && y == -1) {
          if (op == BinaryOp::Modulo) return Value(int64_t{0});
          fail_overflow();
        }
        int64_t q = x / y, r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) {
          q -= 1;
          r += y;
        }
        return Value(op == BinaryOp::FloorDivide ? q : r);
      }
      const auto [q, r] = float_divmod(a.number(), b.number());
      return Value(op == BinaryOp::FloorDivide ? q : r);
    }
    case BinaryOp::Power:
      return power(a, b);
    default:
      fail_operands(symbol_of(op), a, b);
  }
}

Value negate(const Value& value) {
  fail_if_undefined(value);
  if (value.is<double>()) return Value(-value.as<double>());
  if (!value.is_integer()) throw Error("bad operand type for unary -: '" + value.type_name() + "'");
  if (value.integer() == std::numeric_limits<int64_t>::min()) fail_overflow();
  return Value(-value.integer());
}

Value unary_plus(const Value& value) {
  fail_if_undefined(value);
  if (value.is<double>()) return value;
  if (!value.is_integer()) throw Error("bad operand type for unary +: '" + value.type_name() + "'");
  return Value(value.integer());
}

bool compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::Equal: return equal(a, b);
    case CompareOp::NotEqual: return !equal(a, b);
    case CompareOp::In: return contains(b, a);
    case CompareOp::NotIn: return !contains(b, a);
    default: break;
  }
  fail_if_undefined(a);
  fail_if_undefined(b);
  const char* symbol = op == CompareOp::Less        ? "<"
                       : op == CompareOp::LessEqual ? "<="
                       : op == CompareOp::Greater   ? ">"
                                                    : ">=";
  const bool orderable = (a.is_number() && b.is_number()) || (a.is_string() && b.is_string()) ||
                         (is_sequence(a) && is_sequence(b) && a.list()->kind == b.list()->kind);
  if (!orderable) {
    throw Error(std::string("'") + symbol + "' not supported between instances of '" + a.type_name() +
                "' and '" + b.type_name() + "'");
  }
  switch (op) {
    case CompareOp::Less: return less(a, b);
    case CompareOp::LessEqual: return less(a, b) || equal(a, b);
    case CompareOp::Greater: return less(b, a);
    default: return less(b, a) || equal(a, b);
  }
}

bool contains(const Value& container, const Value& item) {
  if (container.is_undefined()) return false;
  if (container.is_string()) {
    if (!item.is_string()) {
      throw Error("'in <string>' requires string as left operand, not " + item.type_name());
    }
    return container.string().find(item.string()) != std::string::npos;
  }
  if (const Dict* dict = container.dict()) {
    if (!hashable(item)) throw Error("unhashable type: '" + item.type_name() + "'");
    return item.is_string() && dict->find(item.string()) != nullptr;
  }
  if (const List* list = container.list()) {
    for (const Value& v : list->items) {
      if (equal(v, item)) return true;
    }
    return false;
  }
  if (container.is<std::shared_ptr<Generator>>()) {
    Generator& g = consume(container);
    while (g.next < g.items.size()) {
      if (equal(g.items[g.next++], item)) return true;
    }
    return false;
  }
  throw Error("argument of type '" + container.type_name() + "' is not iterable");
}

std::vector<Value> iterate(const Value& value) {
  if (value.is_undefined()) return {};
  if (const List* list = value.list()) return list->items;
  if (value.is_string()) {
    std::vector<Value> chars;
    for (const char32_t c : py::decode(value.string())) {
      std::string s;
      py::append_utf8(s, c);
      chars.emplace_back(std::move(s));
    }
    return chars;
  }
  if (const Dict* dict = value.dict()) {
    std::vector<Value> keys;
    keys.reserve(dict->entries.size());
    for (const auto& entry : dict->entries) keys.emplace_back(entry.first);
    return keys;
  }
  if (value.is<std::shared_ptr<Generator>>()) {
    Generator& g = consume(value);
    std::vector<Value> rest(g.items.begin() + static_cast<std::ptrdiff_t>(g.next), g.items.end());
    g.next = g.items.size();
    return rest;
  }
  throw Error("'" + value.type_name() + "' object is not iterable");
}

int64_t length(const Value& value) {
  if (value.is_undefined()) return 0;
  if (value.is_string()) return static_cast<int64_t>(py::length(value.string()));
  if (const List* list = value.list()) return static_cast<int64_t>(list->items.size());
  if (const Dict* dict = value.dict()) return static_cast<int64_t>(dict->entries.size());
  if (value.is<std::shared_ptr<Object>>() &&
      value.as<std::shared_ptr<Object>>()->kind == Object::Kind::Loop) {
    return value.as<std::shared_ptr<Object>>()->attributes.find("length")->integer();
  }
  throw Error("object of type '" + value.type_name() + "' has no len()");
}

Value slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  fail_if_undefined(object);
  // jinja2 slices with Python's own subscription, so what cannot be sliced raises.
  const bool is_text = object.is_string();
  if (!is_text && !is_sequence(object)) {
    if (object.dict() != nullptr) throw Error("unhashable type: 'slice'");
    throw Error("'" + object.type_name() + "' object is not subscriptable");
  }
  for (const Value* part : {&start, &stop, &step}) {
    if (!part->is_none() && !part->is_integer()) {
      throw Error("slice indices must be integers or None or have an __index__ method");
    }
  }
  const std::u32string text = is_text ? py::decode(object.string()) : std::u32string();
  const int64_t n = is_text ? static_cast<int64_t>(text.size())
                            : static_cast<int64_t>(object.list()->items.size());
  // CPython's PySlice_AdjustIndices.
  const int64_t s = step.is_none() ? 1 : step.integer();
  if (s == 0) throw Error("slice step cannot be zero");
  auto adjust = [&](const Value& v, int64_t fallback) {
    if (v.is_none()) return fallback;
    int64_t i = v.integer();
    if (i < 0) {
      i += n;
      if (i < 0) i = s < 0 ? -1 : 0;
    } else if (i >= n) {
      i = s < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t first = adjust(start, s < 0 ? n - 1 : 0);
  const int64_t last = adjust(stop, s < 0 ? -1 : n);
  std::vector<int64_t> indices;
  for (int64_t i = first; s > 0 ? i < last : i > last; i += s) indices.push_back(i);
  if (is_text) {
    std::u32string out;
    for (const int64_t i : indices) out.push_back(text[i]);
    return Value(py::encode(out));
  }
  std::vector<Value> items;
  for (const int64_t i : indices) items.push_back(object.list()->items[i]);
  return Value::list(std::move(items), object.list()->kind);
}

namespace {

std::string pad(std::string text, int64_t width, bool left_align) {
  const auto n = static_cast<int64_t>(py::length(text));
  if (width <= n) return text;
  const std::string spaces(width - n, ' ');
  return left_align ? text + spaces : spaces + text;
}

}  // namespace

std::string percent_format(const std::string& format, const Value& args) {
  // A tuple gives the arguments; anything else is one argument. Python takes an argument that
  // has [] (a dict, a list, Undefined) as a mapping too: %(key)s reads it, and it may go unused.
  const Dict* mapping = args.dict();
  const List* list = args.list();
  const bool tuple = list != nullptr && list->kind == SequenceKind::Tuple;
  const bool mapping_like = !tuple && (mapping != nullptr || list != nullptr || args.is_undefined());
  std::vector<Value> positional;
  if (tuple) {
    positional = list->items;
  } else {
    positional.push_back(args);
  }
  size_t next_arg = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) throw Error("incomplete format");
    if (format[i] == '%') {  // only a bare %% is a percent sign
      out += '%';
      continue;
    }
    const Value* arg = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      fail_if_undefined(args);
      if (mapping == nullptr || close == std::string::npos) throw Error("format requires a mapping");
      arg = mapping->find(format.substr(i + 1, close - i - 1));
      if (arg == nullptr) throw Error("KeyError: '" + format.substr(i + 1, close - i - 1) + "'");
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() && std::string_view("-+ #0").find(format[i]) != std::string_view::npos) flags += format[i++];
    // Width and precision, saturated just above what is allowed.
    auto read_number = [&](int64_t& number) {
      for (; i < format.size() && std::isdigit(static_cast<unsigned char>(format[i])); ++i) {
        number = std::min<int64_t>(number * 10 + (format[i] - '0'), 1 << 20);
      }
    };
    int64_t width = 0;
    read_number(width);
    int64_t precision = -1;
    if (i < format.size() && format[i] == '.') {
      ++i;
      precision = 0;
      read_number(precision);
    }
    if (i >= format.size()) throw Error("incomplete format");
    if (width > 4096 || precision > 4096) throw Error("format width or precision too large");
    const char type = format[i];
    if (arg == nullptr) {
      if (next_arg < positional.size()) {
        arg = &positional[next_arg++];
      } else {
        throw Error("not enough arguments for format string");
      }
    }
    const bool left = flags.find('-') != std::string::npos;
    switch (type) {
      case 's':
      case 'r':
      case 'a': {
        std::string text = type == 's' ? arg->str() : arg->repr();
        if (precision >= 0) text = py::encode(py::decode(text).substr(0, precision));
        out += pad(std::move(text), width, left);
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o':
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!arg->is_number()) {
          throw Error(std::string("%") + type + " format: a real number is required, not " + arg->type_name());
        }
        const bool integral = std::string_view("diuxXo").find(type) != std::string_view::npos;
        std::string spec = "%" + flags + (width > 0 ? std::to_string(width) : "") +
                           (precision >= 0 ? "." + std::to_string(precision) : "");
        char buffer[8192];
        if (integral) {
          const double d = arg->number();
          if (!arg->is_integer() && (type != 'd' && type != 'i' && type != 'u')) {
            throw Error(std::string("%") + type + " format: an integer is required, not float");
          }
          if (!std::isfinite(d)) throw Error("cannot convert float infinity or NaN to integer");
          const long long v = arg->is_integer() ? arg->integer() : static_cast<long long>(d);
          spec += "ll";
          spec += type == 'u' ? 'd' : type;
          std::snprintf(buffer, sizeof buffer, spec.c_str(), v);
          std::string text = buffer;
          if (type == 'o' && flags.find('#') != std::string::npos) {
            const size_t zero = text.find('0');  // C writes 0755, Python 0o755
            if (zero != std::string::npos) text.insert(zero + 1, "o");
          }
          out += text;
        } else {
          spec += type;
          std::snprintf(buffer, sizeof buffer, spec.c_str(), arg->number());
          out += buffer;
        }
        break;
      }
      case 'c': {
        std::string text;
        if (arg->is_string() && py::length(arg->string()) == 1) {
          text = arg->string();
        } else if (arg->is_integer() && arg->integer() >= 0 && arg->integer() <= 0x10FFFF &&
                   !(arg->integer() >= 0xD800 && arg->integer() <= 0xDFFF)) {
          py::append_utf8(text, static_cast<char32_t>(arg->integer()));
        } else {
          throw Error("%c requires an int or a unicode character");
        }
        out += pad(std::move(text), width, left);
        break;
      }
      default:
        throw Error(std::string("unsupported format character '") + type + "'");
    }
  }
  if (!mapping_like && next_arg < positional.size()) {
    throw Error("not all arguments converted during string formatting");
  }
  return out;
}

}  // namespace ditto::jinja
