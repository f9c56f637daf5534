#pragma once
// The syntax tree of a template, as jinja2's parser builds it (jinja2/nodes.py), for the
// subset ditto supports.
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "chat/lexer.h"
#include "chat/value.h"

namespace ditto::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Filters and tests are resolved when the template is parsed; a name that is neither is null
// and fails when reached (jinja2 defers those inside `if` and conditional expressions).
using FilterFn = Value (*)(Interpreter&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& input, CallArgs& args);

struct Arguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

enum class UnaryOp { Not, Negate, Plus };
enum class BinaryOp { Or, And, Add, Subtract, Multiply, Divide, FloorDivide, Modulo, Power, Concat };
enum class CompareOp { Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual, In, NotIn };

struct Literal {
  Value value;
};
struct Name {
  std::string name;
};
struct SequenceLiteral {
  std::vector<ExprPtr> items;
  bool tuple;
};
struct DictLiteral {
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};
struct GetAttr {  // object.name: an attribute first, then an item
  ExprPtr object;
  std::string name;
};
struct GetItem {  // object[index]: an item first, then an attribute
  ExprPtr object;
  ExprPtr index;
};
struct Slice {  // object[start:stop:step], each part optional
  ExprPtr object;
  ExprPtr start, stop, step;
};
struct Call {
  ExprPtr callee;
  Arguments args;
};
struct Filter {
  ExprPtr input;  // null in `{% filter %}` and `{% set x | f %}` blocks: the block's text
  std::string name;
  FilterFn function;
  Arguments args;
};
struct Test {
  ExprPtr input;
  std::string name;
  TestFn function;
  Arguments args;
};
struct Unary {
  UnaryOp op;
  ExprPtr operand;
};
struct Binary {
  BinaryOp op;
  ExprPtr left, right;
};
struct Compare {
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;  // a < b < c compares pairwise
};
struct Conditional {  // then if condition else otherwise
  ExprPtr condition, then;
  ExprPtr otherwise;  // may be null: undefined
};

struct Expr {
  Location where;
  std::variant<Literal, Name, SequenceLiteral, DictLiteral, GetAttr, GetItem, Slice, Call, Filter,
               Test, Unary, Binary, Compare, Conditional>
      node;
};

// The left side of an assignment or a loop: a name, names to unpack, or namespace.attribute.
struct Target {
  enum class Kind { Name, Unpack, NamespaceAttribute } kind;
  std::vector<std::string> names;  // NamespaceAttribute: the namespace's name
  std::string attribute;
};

struct Stmt;
using Body = std::vector<Stmt>;

struct Text {
  std::string text;
};
struct Output {
  ExprPtr value;
};
struct If {
  std::vector<std::pair<ExprPtr, Body>> branches;  // if and elifs
  Body otherwise;
};
struct For {
  Target target;
  ExprPtr iterable;
  ExprPtr filter;  // for x in xs if filter; may be null
  Body body;
  Body otherwise;  // when nothing was iterated
};
struct Set {
  Target target;
  ExprPtr value;
};
struct SetBlock {  // {% set x %}...{% endset %}, optionally through filters
  Target target;
  ExprPtr filter;  // may be null
  Body body;
};
struct FilterBlock {
  ExprPtr filter;
  Body body;
};
struct Macro {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // of the last params
  Body body;
  // The body reads `varargs` / `kwargs`: extra arguments are collected there instead of
  // being errors.
  bool uses_varargs = false;
  bool uses_kwargs = false;
};
// A body with its own scope: {% with %} (with its assignments) and transformers'
// {% generation %}.
struct Scoped {
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};
struct Break {};
struct Continue {};

struct Stmt {
  Location where;
  std::variant<Text, Output, If, For, Set, SetBlock, FilterBlock, Macro, Scoped, Break, Continue>
      node;
};

struct Program {
  Body body;
};

}  // namespace ditto::jinja
