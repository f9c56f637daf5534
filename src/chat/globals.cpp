// The globals of transformers' environment: jinja2's range, dict and namespace (dict and
// namespace as transformers restricts them), raise_exception and strftime_now.
#include <ctime>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/operations.h"
#include "ditto/error.h"

namespace ditto::jinja {

namespace {

// jinja2's sandbox refuses ranges longer than this.
constexpr int64_t kMaxRange = 100000;

Value function(std::string name, std::function<Value(Interpreter&, CallArgs&)> call) {
  return Value(Value::Data(
      std::make_shared<const Callable>(Callable{Callable::Kind::Function, std::move(name), std::move(call)})));
}

Value range(Interpreter&, CallArgs& args) {
  if (!args.keyword.empty()) throw Error("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3) {
    throw Error("range expected 1 to 3 arguments, got " + std::to_string(args.positional.size()));
  }
  int64_t bounds[3] = {0, 0, 1};
  for (size_t i = 0; i < args.positional.size(); ++i) {
    bounds[args.positional.size() == 1 ? 1 : i] = to_integer("range", args.positional[i]);
  }
  const auto [start, stop, step] = bounds;
  if (step == 0) throw Error("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(items.size()) == kMaxRange) {
      throw Error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    items.emplace_back(i);
    if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
  }
  return Value::list(std::move(items));
}

// dict(*args, **kwargs) as Python builds it: a mapping or pairs, then keywords.
Dict build_dict(std::string_view name, CallArgs& args) {
  if (args.positional.size() > 1) throw Error(std::string(name) + " expected at most 1 argument");
  Dict dict;
  if (!args.positional.empty()) {
    const Value& source = args.positional.front();
    fail_if_undefined(source);  // Python asks it for keys(), which Undefined refuses
    if (const Dict* d = source.dict()) {
      dict = *d;
    } else {
      for (const Value& pair : iterate(source)) {
        const std::vector<Value> parts = pair.is_string() || pair.list() != nullptr ? iterate(pair) : std::vector<Value>{};
        if (parts.size() != 2) throw Error(std::string(name) + ": each element must be a pair");
        if (!parts[0].is_string()) throw Error(std::string(name) + ": keys must be strings in chat templates");
        dict.set(parts[0].string(), parts[1]);
      }
    }
  }
  for (auto& [key, value] : args.keyword) dict.set(key, value);
  return dict;
}

}  // namespace

void check_namespace_attribute(const std::string& name) {
  if (name.starts_with("_")) {
    throw Error("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" + name +
                "'. Please rename the attribute.");
  }
}

Dict make_globals() {
  Dict globals;
  globals.set("range", function("range", range));
  globals.set("dict", function("dict", [](Interpreter&, CallArgs& args) { return Value(build_dict("dict", args)); }));
  globals.set("namespace", function("namespace", [](Interpreter& interpreter, CallArgs& args) {
                Dict attributes = build_dict("namespace", args);
                for (const auto& entry : attributes.entries) check_namespace_attribute(entry.first);
                return Value(Value::Data(interpreter.make_namespace(std::move(attributes))));
              }));
  globals.set("raise_exception", function("raise_exception", [](Interpreter&, CallArgs& args) -> Value {
                BoundArgs bound("raise_exception", args, {"message"}, 1);
                throw Error(bound[0].str());
              }));
  globals.set("strftime_now", function("strftime_now", [](Interpreter&, CallArgs& args) {
                BoundArgs bound("strftime_now", args, {"format"}, 1);
                const std::string format = to_string_arg("strftime_now", bound[0]);
                const std::time_t now = std::time(nullptr);
                std::tm local{};
                localtime_r(&now, &local);
                std::string out(256 + format.size() * 64, '\0');
                const size_t n = format.empty() ? 0 : std::strftime(out.data(), out.size(), format.c_str(), &local);
                out.resize(n);
                return Value(std::move(out));
              }));
  return globals;
}

}  // namespace ditto::jinja
