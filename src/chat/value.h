#pragma once
// The values a chat template computes with: what Python objects are to jinja2. JSON data
// (None, bool, int, float, str, list, dict) plus what JSON lacks: Undefined, tuples,
// generators (the one-pass results of filters such as map and select), namespaces, the loop
// object, and callables (macros, builtins, bound methods). Lists and dicts are immutable once
// built and shared; a namespace is the one mutable object, as in jinja2's sandbox.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ditto::jinja {

class Value;
class Interpreter;

// Lists, dicts and the like nest at most this deep, so that printing, comparing and freeing a
// value cannot run out of stack however a template builds it. (Namespaces are not counted: the
// interpreter holds every namespace until the render ends and then empties them, which also
// frees reference cycles through them.)
inline constexpr int kMaxValueDepth = 256;

// What printing a sequence shows around its items: a list, a tuple, or a dict view.
enum class SequenceKind { List, Tuple, Keys, Values, Items };

struct List {
  std::vector<Value> items;
  SequenceKind kind = SequenceKind::List;
  int depth = 1;  // set when wrapped in a Value
};

// A dict keeps insertion order, as Python's does; keys are strings.
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* find(std::string_view key) const;
  // Replaces the value of an existing key in place, else appends.
  void set(std::string key, Value value);
  int depth = 1;  // set when wrapped in a Value
};

// A generator: iterating it consumes it, it is always true, and it has no length. jinja2's
// generator filters run only when iterated, so one that failed keeps its error for then.
struct Generator {
  std::vector<Value> items;
  size_t next = 0;
  int depth = 1;
  std::string error;  // raised when consumed, if not empty
};

// A namespace(...) or a loop object: attributes by name.
struct Object {
  enum class Kind { Namespace, Loop } kind;
  Dict attributes;
  int depth = 0;  // of a loop object; 0 for a namespace (see kMaxValueDepth)
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Callable {
  enum class Kind { Macro, Function, Method } kind;
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> call;
  int depth = 0;  // of a method: one more than the value it is bound to
};

// An undefined value remembers why it is undefined, for the error that using it raises.
struct Undefined {
  std::string reason;  // e.g. "'x' is undefined"
};

struct None {};

class Value {
 public:
  using Data = std::variant<Undefined, None, bool, int64_t, double, std::string,
                            std::shared_ptr<const List>, std::shared_ptr<const Dict>,
                            std::shared_ptr<Generator>, std::shared_ptr<Object>,
                            std::shared_ptr<const Callable>>;

  Value() : data_(None{}) {}
  Value(Data data) : data_(std::move(data)) {}
  Value(bool b) : data_(b) {}
  Value(int64_t i) : data_(i) {}
  Value(int i) : data_(static_cast<int64_t>(i)) {}
  Value(double d) : data_(d) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(const char* s) : data_(std::string(s)) {}
  // Raise ditto::Error beyond kMaxValueDepth.
  Value(List list);
  Value(Dict dict);

  static Value undefined(std::string reason) { return Value(Data(Undefined{std::move(reason)})); }
  static Value list(std::vector<Value> items, SequenceKind kind = SequenceKind::List) {
    return Value(List{std::move(items), kind});
  }

  const Data& data() const { return data_; }
  template <typename T>
  bool is() const { return std::holds_alternative<T>(data_); }
  template <typename T>
  const T& as() const { return std::get<T>(data_); }

  bool is_undefined() const { return is<Undefined>(); }
  bool is_none() const { return is<None>(); }
  bool is_string() const { return is<std::string>(); }
  bool is_integer() const { return is<int64_t>() || is<bool>(); }  // bool is an int in Python
  bool is_number() const { return is_integer() || is<double>(); }
  const std::string& string() const { return as<std::string>(); }
  const List* list() const;  // lists and tuples, else null
  const Dict* dict() const;
  int64_t integer() const { return is<bool>() ? as<bool>() : as<int64_t>(); }
  double number() const { return is<double>() ? as<double>() : static_cast<double>(integer()); }

  bool truthy() const;
  int depth() const;  // 0 for scalars
  // Python's type name, as in error messages: "str", "list", "NoneType", ...
  std::string type_name() const;
  // str() and repr() of the Python object.
  std::string str() const;
  std::string repr() const;

 private:
  Data data_;
};

// One more than the deepest of `items`; ditto::Error beyond kMaxValueDepth.
int depth_above(const std::vector<Value>& items);

// Python's == and <; `less` raises ditto::Error for types that do not order.
bool equal(const Value& a, const Value& b);
bool less(const Value& a, const Value& b);

// The template's view of JSON data: objects keep their order. Strings must be valid UTF-8.
Value from_json(const nlohmann::ordered_json& json, int depth = 0);

}  // namespace ditto::jinja
