// jinja2's builtin tests (jinja2/tests.py): what `x is name` asks.
#include <algorithm>

#include "chat/builtins.h"
#include "chat/operations.h"
#include "chat/py_text.h"
#include "ditto/error.h"

namespace ditto::jinja {

namespace {

using I = Interpreter;
using A = CallArgs;

bool no_args(std::string_view name, A& a) {
  BoundArgs(name, a, {});
  return true;
}

// The tests that compare with one argument: eq, lt, in, ...
template <CompareOp op>
bool comparison(I&, const Value& v, A& a) {
  BoundArgs args("comparison", a, {"other"}, 1);
  return compare(op, v, args[0]);
}

bool is_callable(const Value& v) {
  // Undefined has __call__, and a loop object is callable (for recursive loops), in jinja2.
  return v.is<std::shared_ptr<const Callable>>() || v.is_undefined() ||
         (v.is<std::shared_ptr<Object>>() && v.as<std::shared_ptr<Object>>()->kind == Object::Kind::Loop);
}

bool remainder_is(const Value& v, const Value& divisor, int64_t expected) {
  return equal(arithmetic(BinaryOp::Modulo, v, divisor, 0), Value(expected));
}

// Python's `is` for what templates compare: singletons, small ints (cached by CPython), and
// the same object.
bool same_object(const Value& a, const Value& b) {
  if (a.is_none() || a.is<bool>()) return a.data().index() == b.data().index() && equal(a, b);
  if (a.is<int64_t>()) return b.is<int64_t>() && a.integer() == b.integer() && a.integer() >= -5 && a.integer() <= 256;
  if (a.data().index() != b.data().index()) return false;
  if (a.list() != nullptr) return a.list() == b.list();
  if (a.dict() != nullptr) return a.dict() == b.dict();
  if (a.is<std::shared_ptr<Object>>() || a.is<std::shared_ptr<Generator>>() ||
      a.is<std::shared_ptr<const Callable>>()) {
    return equal(a, b);
  }
  return false;
}

struct TestEntry {
  std::string_view name;
  TestFn function;
};

const TestEntry kTests[] = {
    {"odd", [](I&, const Value& v, A& a) { return no_args("odd", a) && remainder_is(v, Value(2), 1); }},
    {"even", [](I&, const Value& v, A& a) { return no_args("even", a) && remainder_is(v, Value(2), 0); }},
    {"divisibleby",
     [](I&, const Value& v, A& a) {
       BoundArgs args("divisibleby", a, {"num"}, 1);
       return remainder_is(v, args[0], 0);
     }},
    {"defined", [](I&, const Value& v, A& a) { return no_args("defined", a) && !v.is_undefined(); }},
    {"undefined", [](I&, const Value& v, A& a) { return no_args("undefined", a) && v.is_undefined(); }},
    {"none", [](I&, const Value& v, A& a) { return no_args("none", a) && v.is_none(); }},
    {"boolean", [](I&, const Value& v, A& a) { return no_args("boolean", a) && v.is<bool>(); }},
    {"false", [](I&, const Value& v, A& a) { return no_args("false", a) && v.is<bool>() && !v.as<bool>(); }},
    {"true", [](I&, const Value& v, A& a) { return no_args("true", a) && v.is<bool>() && v.as<bool>(); }},
    {"integer", [](I&, const Value& v, A& a) { return no_args("integer", a) && v.is<int64_t>(); }},
    {"float", [](I&, const Value& v, A& a) { return no_args("float", a) && v.is<double>(); }},
    {"number", [](I&, const Value& v, A& a) { return no_args("number", a) && v.is_number(); }},
    {"string", [](I&, const Value& v, A& a) { return no_args("string", a) && v.is_string(); }},
    {"mapping", [](I&, const Value& v, A& a) { return no_args("mapping", a) && v.dict() != nullptr; }},
    {"sequence",
     [](I&, const Value& v, A& a) {
       // Has len() and [] in Python: str, list, tuple, dict, and Undefined.
       const List* list = v.list();
       return no_args("sequence", a) &&
              (v.is_string() || v.dict() != nullptr || v.is_undefined() ||
               (list != nullptr && (list->kind == SequenceKind::List || list->kind == SequenceKind::Tuple)));
     }},
    {"iterable",
     [](I&, const Value& v, A& a) {
       return no_args("iterable", a) &&
              (v.is_string() || v.list() != nullptr || v.dict() != nullptr || v.is_undefined() ||
               v.is<std::shared_ptr<Generator>>() ||
               (v.is<std::shared_ptr<Object>>() && v.as<std::shared_ptr<Object>>()->kind == Object::Kind::Loop));
     }},
    {"callable", [](I&, const Value& v, A& a) { return no_args("callable", a) && is_callable(v); }},
    {"lower",
     [](I&, const Value& v, A& a) {
       const std::string s = v.str();
       return no_args("lower", a) && py::lower(s) == s && py::upper(s) != s;
     }},
    {"upper",
     [](I&, const Value& v, A& a) {
       const std::string s = v.str();
       return no_args("upper", a) && py::upper(s) == s && py::lower(s) != s;
     }},
    {"sameas",
     [](I&, const Value& v, A& a) {
       BoundArgs args("sameas", a, {"other"}, 1);
       return same_object(v, args[0]);
     }},
    {"escaped",
     [](I&, const Value&, A& a) {
       no_args("escaped", a);
       return false;  // nothing is markup-safe in ditto's templates (see docs)
     }},
    {"filter",
     [](I&, const Value& v, A& a) {
       return no_args("filter", a) && v.is_string() && find_filter(v.string()) != nullptr;
     }},
    {"test",
     [](I&, const Value& v, A& a) { return no_args("test", a) && v.is_string() && find_test(v.string()) != nullptr; }},
    {"in", comparison<CompareOp::In>},
    {"==", comparison<CompareOp::Equal>},
    {"eq", comparison<CompareOp::Equal>},
    {"equalto", comparison<CompareOp::Equal>},
    {"!=", comparison<CompareOp::NotEqual>},
    {"ne", comparison<CompareOp::NotEqual>},
    {">", comparison<CompareOp::Greater>},
    {"gt", comparison<CompareOp::Greater>},
    {"greaterthan", comparison<CompareOp::Greater>},
    {">=", comparison<CompareOp::GreaterEqual>},
    {"ge", comparison<CompareOp::GreaterEqual>},
    {"<", comparison<CompareOp::Less>},
    {"lt", comparison<CompareOp::Less>},
    {"lessthan", comparison<CompareOp::Less>},
    {"<=", comparison<CompareOp::LessEqual>},
    {"le", comparison<CompareOp::LessEqual>},
};

}  // namespace

TestFn find_test(std::string_view name) {
  for (const TestEntry& entry : kTests) {
    if (entry.name == name) return entry.function;
  }
  return nullptr;
}

bool call_test(Interpreter& interpreter, std::string_view name, const Value& input, CallArgs& args) {
  const TestFn function = find_test(name);
  if (function == nullptr) throw Error("no test named '" + std::string(name) + "'");
  return function(interpreter, input, args);
}

}  // namespace ditto::jinja
