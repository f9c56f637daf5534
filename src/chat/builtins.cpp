#include "chat/builtins.h"

#include "chat/py_text.h"
#include "ditto/error.h"

namespace ditto::jinja {

BoundArgs::BoundArgs(std::string_view function, CallArgs& args,
                     std::initializer_list<std::string_view> params, size_t required)
    : values_(params.size()) {
  const std::vector<std::string_view> names(params);
  if (args.positional.size() > names.size()) {
    throw Error(std::string(function) + "() takes at most " + std::to_string(names.size()) +
                " argument(s), got " + std::to_string(args.positional.size()));
  }
  for (size_t i = 0; i < args.positional.size(); ++i) values_[i] = std::move(args.positional[i]);
  for (auto& [key, value] : args.keyword) {
    size_t i = 0;
    while (i < names.size() && names[i] != key) ++i;
    if (i == names.size()) {
      throw Error(std::string(function) + "() got an unexpected keyword argument '" + key + "'");
    }
    if (values_[i]) {
      throw Error(std::string(function) + "() got multiple values for argument '" + key + "'");
    }
    values_[i] = std::move(value);
  }
  for (size_t i = 0; i < required; ++i) {
    if (!values_[i]) {
      throw Error(std::string(function) + "() missing required argument '" + std::string(names[i]) + "'");
    }
  }
}

int64_t to_integer(std::string_view function, const Value& value) {
  if (!value.is_integer()) {
    throw Error(std::string(function) + ": '" + value.type_name() +
                "' object cannot be interpreted as an integer");
  }
  return value.integer();
}

std::string to_string_arg(std::string_view function, const Value& value) {
  if (!value.is_string()) {
    throw Error(std::string(function) + ": expected a string, got '" + value.type_name() + "'");
  }
  return value.string();
}

Value make_generator(std::vector<Value> items) {
  const int depth = depth_above(items);
  return Value(Value::Data(std::make_shared<Generator>(Generator{std::move(items), 0, depth, {}})));
}

Value lazily(const std::function<std::vector<Value>()>& compute) {
  try {
    return make_generator(compute());
  } catch (const Error& error) {
    return Value(Value::Data(std::make_shared<Generator>(Generator{{}, 0, 1, std::string(error.what())})));
  }
}

Value get_item(const Value& object, const Value& key) {
  if (const List* list = object.list()) {
    if (key.is_integer() && (list->kind == SequenceKind::List || list->kind == SequenceKind::Tuple)) {
      int64_t i = key.integer();
      const auto n = static_cast<int64_t>(list->items.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return list->items[i];
      return Value::undefined(object.type_name() + " object has no element " + key.repr());
    }
  } else if (object.is_string() && key.is_integer()) {
    const std::u32string text = py::decode(object.string());
    int64_t i = key.integer();
    const auto n = static_cast<int64_t>(text.size());
    if (i < 0) i += n;
    if (i >= 0 && i < n) return Value(py::encode(text.substr(i, 1)));
    return Value::undefined("str object has no element " + key.repr());
  } else if (const Dict* dict = object.dict(); dict != nullptr && key.is_string()) {
    if (const Value* found = dict->find(key.string())) return *found;
  }
  if (key.is_string()) return get_attribute(object, key.string());
  return Value::undefined("'" + object.type_name() + " object' has no element " + key.repr());
}

}  // namespace ditto::jinja
