#pragma once
// What a template can call: jinja2's filters and tests, the globals of transformers'
// environment, and the methods of Python's str, dict and list that templates use.
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/ast.h"
#include "chat/value.h"

namespace ditto::jinja {

// Null for names that are not filters (tests); `unsupported` tells a jinja2 builtin that ditto
// does not implement from a name that does not exist at all.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);
bool is_unsupported_filter(std::string_view name);

// range, dict, namespace, raise_exception, strftime_now.
Dict make_globals();
// transformers' namespace refuses attributes whose name starts with an underscore.
void check_namespace_attribute(const std::string& name);

// obj.name as jinja2's sandbox resolves it: a safe attribute or method first, then (unless
// `attributes_only`, as the attr filter asks) an item; Undefined if neither. Methods that
// modify lists and dicts are unsafe: calling them fails.
Value get_attribute(const Value& object, const std::string& name, bool attributes_only = false);
// obj[key]: an item first, then (for a string key) an attribute.
Value get_item(const Value& object, const Value& key);

Value make_generator(std::vector<Value> items);
// What a generator filter returns: its items, or (if computing them failed) a generator that
// raises that error when iterated, as jinja2's lazy generators do.
Value lazily(const std::function<std::vector<Value>()>& compute);

// Calls a filter or test by name, as map('upper') and select('odd') do.
Value call_filter(Interpreter& interpreter, std::string_view name, const Value& input, CallArgs& args);
bool call_test(Interpreter& interpreter, std::string_view name, const Value& input, CallArgs& args);

// The arguments of a builtin bound to its parameters: positional ones first, then keywords, as
// Python binds them. Raises ditto::Error for too many, unknown, repeated or missing ones.
class BoundArgs {
 public:
  BoundArgs(std::string_view function, CallArgs& args, std::initializer_list<std::string_view> params,
            size_t required = 0);
  bool has(size_t i) const { return values_[i].has_value(); }
  const Value& operator[](size_t i) const { return *values_[i]; }
  Value get(size_t i, Value fallback) const { return has(i) ? *values_[i] : std::move(fallback); }
  // A parameter given and not None.
  bool given(size_t i) const { return has(i) && !values_[i]->is_none(); }

 private:
  std::vector<std::optional<Value>> values_;
};

// Argument conversions with errors that name the function.
int64_t to_integer(std::string_view function, const Value& value);
std::string to_string_arg(std::string_view function, const Value& value);

}  // namespace ditto::jinja
