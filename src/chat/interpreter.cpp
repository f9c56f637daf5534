#include "chat/interpreter.h"

#include "chat/builtins.h"
#include "chat/operations.h"
#include "ditto/error.h"

namespace ditto::jinja {

namespace {

// Nested evaluation deeper than this (deep expressions, recursive macros) is refused before
// the stack runs out.
constexpr int kMaxDepth = 500;

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;  // clang 14 does not deduce aggregates by itself

}  // namespace

// Counts nested exec/eval calls.
struct Interpreter::DepthGuard {
  explicit DepthGuard(Interpreter& interpreter) : interpreter(interpreter) {
    if (++interpreter.depth_ > kMaxDepth) {
      throw Error("the template nests too deeply (a macro that calls itself without end?)");
    }
  }
  ~DepthGuard() { --interpreter.depth_; }
  Interpreter& interpreter;
};

const Value* Interpreter::Scope::find(std::string_view name) const {
  for (const Scope* scope = this; scope != nullptr; scope = scope->parent.get()) {
    if (const Value* value = scope->variables.find(name)) return value;
  }
  return nullptr;
}

Interpreter::Interpreter(const Program& program, const RenderLimits& limits)
    : program_(program), limits_(limits) {}

Interpreter::~Interpreter() {
  // A namespace can hold itself, directly or through lists and generators: emptying every
  // namespace frees such cycles, and frees a chain of namespaces without recursing.
  for (const auto& ns : namespaces_) ns->attributes.entries.clear();
}

std::string Interpreter::render(const Dict& variables) {
  auto globals = std::make_shared<Scope>(Scope{nullptr, make_globals()});
  auto top = std::make_shared<Scope>(Scope{globals, variables});
  std::string out;
  exec(program_.body, top, out);
  return out;
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes) {
    throw Error("the template's output or a string it builds exceeds " +
                std::to_string(limits_.max_output_bytes) + " bytes");
  }
}

void Interpreter::append(std::string& out, std::string_view text) const {
  check_size(out.size() + text.size());
  out += text;
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps) {
    throw Error("the template ran more than " + std::to_string(limits_.max_steps) +
                " loop iterations and macro calls");
  }
}

std::shared_ptr<Object> Interpreter::make_namespace(Dict attributes) {
  auto ns = std::make_shared<Object>(Object{Object::Kind::Namespace, std::move(attributes)});
  namespaces_.push_back(ns);
  return ns;
}

// --- statements

Interpreter::Flow Interpreter::exec(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const Stmt& stmt : body) {
    const Flow flow = exec(stmt, scope, out);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
  DepthGuard guard(*this);
  try {
    return std::visit(
        Overloaded{
            [&](const Text& text) {
              append(out, text.text);
              return Flow::Normal;
            },
            [&](const Output& output) {
              append(out, eval(*output.value, scope).str());
              return Flow::Normal;
            },
            [&](const If& node) {
              for (const auto& [test, body] : node.branches) {
                if (eval(*test, scope).truthy()) return exec(body, scope, out);
              }
              return exec(node.otherwise, scope, out);
            },
            [&](const For& loop) { return exec_for(loop, scope, out); },
            [&](const Set& set) {
              assign(set.target, eval(*set.value, scope), scope);
              return Flow::Normal;
            },
            [&](const SetBlock& block) {
              Value text(render_block(block.body, scope));
              if (block.filter) {
                block_text_ = std::move(text);
                text = eval(*block.filter, scope);
              }
              assign(block.target, std::move(text), scope);
              return Flow::Normal;
            },
            [&](const FilterBlock& block) {
              block_text_ = Value(render_block(block.body, scope));
              append(out, eval(*block.filter, scope).str());
              return Flow::Normal;
            },
            [&](const Macro& macro) {
              macro_scopes_.push_back(scope);
              Scope* defined_in = scope.get();
              const Macro* node = &macro;
              auto callable = std::make_shared<const Callable>(Callable{
                  Callable::Kind::Macro, macro.name,
                  [node, defined_in](Interpreter& interpreter, CallArgs& args) {
                    return interpreter.call_macro(*node, defined_in, args);
                  }});
              scope->variables.set(macro.name, Value(Value::Data(std::move(callable))));
              return Flow::Normal;
            },
            [&](const Scoped& block) {
              auto inner = std::make_shared<Scope>(Scope{scope, {}});
              for (const auto& [target, value] : block.assignments) assign(target, eval(*value, scope), inner);
              std::string text;
              exec(block.body, inner, text);
              append(out, text);
              return Flow::Normal;
            },
            [&](const Break&) { return Flow::Break; },
            [&](const Continue&) { return Flow::Continue; },
        },
        stmt.node);
  } catch (const TemplateError&) {
    throw;
  } catch (const Error& error) {
    throw TemplateError(error.what(), stmt.where.line, stmt.where.column);
  }
}

// The body of a set or filter block, rendered in a scope of its own.
std::string Interpreter::render_block(const Body& body, const ScopePtr& scope) {
  auto inner = std::make_shared<Scope>(Scope{scope, {}});
  std::string text;
  exec(body, inner, text);
  return text;
}

namespace {

Value loop_object(size_t index, size_t count, const std::vector<Value>& items) {
  const auto i = static_cast<int64_t>(index), n = static_cast<int64_t>(count);
  const Value previous = index > 0 ? items[index - 1] : Value::undefined("there is no previous item");
  const Value next = index + 1 < count ? items[index + 1] : Value::undefined("there is no next item");
  // loop.cycle('odd', 'even'): the argument at this iteration's position, round robin.
  const Value cycle(Value::Data(std::make_shared<const Callable>(
      Callable{Callable::Kind::Method, "cycle", [index](Interpreter&, CallArgs& args) {
                 if (args.positional.empty()) throw Error("no items for cycling given");
                 return args.positional[index % args.positional.size()];
               }})));
  Dict attributes;
  attributes.entries = {
      {"index0", Value(i)},
      {"index", Value(i + 1)},
      {"revindex0", Value(n - i - 1)},
      {"revindex", Value(n - i)},
      {"first", Value(index == 0)},
      {"last", Value(index + 1 == count)},
      {"length", Value(n)},
      {"depth", Value(1)},
      {"depth0", Value(0)},
      {"previtem", previous},
      {"nextitem", next},
      {"cycle", cycle},
  };
  const int depth = depth_above({previous, next});
  return Value(Value::Data(std::make_shared<Object>(Object{Object::Kind::Loop, std::move(attributes), depth})));
}

}  // namespace

Interpreter::Flow Interpreter::exec_for(const For& loop, const ScopePtr& scope, std::string& out) {
  std::vector<Value> items = iterate(eval(*loop.iterable, scope));
  if (loop.filter) {
    // `for x in xs if test`: the test sees the loop variables (not `loop`); loop.length and
    // the indices count the items that pass.
    std::vector<Value> kept;
    for (Value& item : items) {
      step();
      auto test_scope = std::make_shared<Scope>(Scope{scope, {}});
      assign(loop.target, item, test_scope);
      if (eval(*loop.filter, test_scope).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    step();
    auto body_scope = std::make_shared<Scope>(Scope{scope, {}});
    assign(loop.target, items[i], body_scope);
    body_scope->variables.set("loop", loop_object(i, items.size(), items));
    if (exec(loop.body, body_scope, out) == Flow::Break) break;
  }
  if (items.empty()) {
    auto else_scope = std::make_shared<Scope>(Scope{scope, {}});
    return exec(loop.otherwise, else_scope, out);
  }
  return Flow::Normal;
}

void Interpreter::assign(const Target& target, Value value, const ScopePtr& scope) {
  switch (target.kind) {
    case Target::Kind::Name:
      scope->variables.set(target.names.front(), std::move(value));
      return;
    case Target::Kind::Unpack: {
      fail_if_undefined(value);
      std::vector<Value> parts = iterate(value);
      const size_t n = target.names.size();
      if (parts.size() > n) throw Error("too many values to unpack (expected " + std::to_string(n) + ")");
      if (parts.size() < n) {
        throw Error("not enough values to unpack (expected " + std::to_string(n) + ", got " +
                    std::to_string(parts.size()) + ")");
      }
      for (size_t i = 0; i < n; ++i) scope->variables.set(target.names[i], std::move(parts[i]));
      return;
    }
    case Target::Kind::NamespaceAttribute: {
      const Value* found = scope->find(target.names.front());
      if (found == nullptr || !found->is<std::shared_ptr<Object>>() ||
          found->as<std::shared_ptr<Object>>()->kind != Object::Kind::Namespace) {
        throw Error("cannot assign attribute on non-namespace object");
      }
      check_namespace_attribute(target.attribute);
      found->as<std::shared_ptr<Object>>()->attributes.set(target.attribute, std::move(value));
      return;
    }
  }
}

// Binds a call's arguments as jinja2's Macro.__call__ does: positional, then keywords for the
// rest, missing ones from their defaults or undefined; extra positional arguments go to
// `varargs` and extra keywords to `kwargs` if the macro's body uses them, else are errors.
Value Interpreter::call_macro(const Macro& macro, Scope* defined_in, CallArgs& args) {
  step();
  const size_t n = macro.params.size();
  if (args.positional.size() > n && !macro.uses_varargs) {
    throw Error("macro '" + macro.name + "' takes not more than " + std::to_string(n) + " argument(s)");
  }
  // The defining scope is kept alive by macro_scopes_; an aliasing pointer shares nothing.
  auto scope = std::make_shared<Scope>(Scope{ScopePtr(ScopePtr{}, defined_in), {}});
  std::vector<std::pair<std::string, Value>> keywords = std::move(args.keyword);
  std::vector<bool> given(n, false);
  for (size_t i = 0; i < n && i < args.positional.size(); ++i) {
    scope->variables.set(macro.params[i], args.positional[i]);
    given[i] = true;
  }
  for (size_t i = args.positional.size(); i < n; ++i) {
    for (auto it = keywords.begin(); it != keywords.end(); ++it) {
      if (it->first == macro.params[i]) {
        scope->variables.set(macro.params[i], std::move(it->second));
        given[i] = true;
        keywords.erase(it);
        break;
      }
    }
  }
  if (!keywords.empty() && !macro.uses_kwargs) {
    throw Error("macro '" + macro.name + "' takes no keyword argument '" + keywords.front().first + "'");
  }
  const size_t first_default = n - macro.defaults.size();
  for (size_t i = 0; i < n; ++i) {
    if (given[i]) continue;
    scope->variables.set(macro.params[i],
                         i >= first_default ? eval(*macro.defaults[i - first_default], scope)
                                            : Value::undefined("parameter '" + macro.params[i] + "' was not provided"));
  }
  if (macro.uses_varargs) {
    std::vector<Value> extra;
    for (size_t i = n; i < args.positional.size(); ++i) extra.push_back(std::move(args.positional[i]));
    scope->variables.set("varargs", Value::list(std::move(extra), SequenceKind::Tuple));
  }
  if (macro.uses_kwargs) {
    Dict extra;
    for (auto& [key, value] : keywords) extra.set(key, std::move(value));
    scope->variables.set("kwargs", Value(std::move(extra)));
  }
  std::string out;
  exec(macro.body, scope, out);
  return Value(std::move(out));
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  fail_if_undefined(callee);
  if (!callee.is<std::shared_ptr<const Callable>>()) {
    throw Error("'" + callee.type_name() + "' object is not callable");
  }
  return callee.as<std::shared_ptr<const Callable>>()->call(*this, args);
}

// --- expressions

Value Interpreter::eval(const Expr& expr, const ScopePtr& scope) {
  DepthGuard guard(*this);
  try {
    return eval_node(expr, scope);
  } catch (const TemplateError&) {
    throw;
  } catch (const Error& error) {
    // The innermost expression that failed names the place.
    throw TemplateError(error.what(), expr.where.line, expr.where.column);
  }
}

CallArgs Interpreter::eval_args(const Arguments& args, const ScopePtr& scope) {
  CallArgs values;
  values.positional.reserve(args.positional.size());
  for (const ExprPtr& arg : args.positional) values.positional.push_back(eval(*arg, scope));
  for (const auto& [key, arg] : args.keyword) {
    for (const auto& existing : values.keyword) {
      if (existing.first == key) throw Error("keyword argument repeated: " + key);
    }
    values.keyword.emplace_back(key, eval(*arg, scope));
  }
  return values;
}

Value Interpreter::apply_filter(const Filter& filter, const ScopePtr& scope) {
  const Value input = filter.input ? eval(*filter.input, scope) : block_text_;
  CallArgs args = eval_args(filter.args, scope);
  if (filter.function == nullptr) {
    throw Error(is_unsupported_filter(filter.name) ? "the filter '" + filter.name + "' is not supported"
                                                   : "no filter named '" + filter.name + "'");
  }
  return filter.function(*this, input, args);
}

Value Interpreter::eval_node(const Expr& expr, const ScopePtr& scope) {
  return std::visit(
      Overloaded{
          [&](const Literal& literal) { return literal.value; },
          [&](const Name& name) {
            const Value* value = scope->find(name.name);
            return value != nullptr ? *value : Value::undefined("'" + name.name + "' is undefined");
          },
          [&](const SequenceLiteral& sequence) {
            std::vector<Value> items;
            items.reserve(sequence.items.size());
            for (const ExprPtr& item : sequence.items) items.push_back(eval(*item, scope));
            return Value::list(std::move(items), sequence.tuple ? SequenceKind::Tuple : SequenceKind::List);
          },
          [&](const DictLiteral& literal) {
            Dict dict;
            for (const auto& [key_expr, value_expr] : literal.entries) {
              const Value key = eval(*key_expr, scope);
              if (!key.is_string()) throw Error("dict keys must be strings in chat templates, got " + key.type_name());
              dict.set(key.string(), eval(*value_expr, scope));
            }
            return Value(std::move(dict));
          },
          [&](const GetAttr& node) {
            const Value object = eval(*node.object, scope);
            fail_if_undefined(object);
            return get_attribute(object, node.name);
          },
          [&](const GetItem& node) {
            const Value object = eval(*node.object, scope);
            fail_if_undefined(object);
            return get_item(object, eval(*node.index, scope));
          },
          [&](const Slice& node) {
            const Value object = eval(*node.object, scope);
            auto part = [&](const ExprPtr& e) { return e ? eval(*e, scope) : Value(); };
            return slice(object, part(node.start), part(node.stop), part(node.step));
          },
          [&](const Call& node) {
            const Value callee = eval(*node.callee, scope);
            CallArgs args = eval_args(node.args, scope);
            return call(callee, args);
          },
          [&](const Filter& filter) { return apply_filter(filter, scope); },
          [&](const Test& test) {
            const Value input = eval(*test.input, scope);
            CallArgs args = eval_args(test.args, scope);
            if (test.function == nullptr) throw Error("no test named '" + test.name + "'");
            return Value(test.function(*this, input, args));
          },
          [&](const Unary& node) {
            const Value operand = eval(*node.operand, scope);
            switch (node.op) {
              case UnaryOp::Not: return Value(!operand.truthy());
              case UnaryOp::Negate: return negate(operand);
              case UnaryOp::Plus: break;
            }
            return unary_plus(operand);
          },
          [&](const Binary& node) {
            Value left = eval(*node.left, scope);
            switch (node.op) {
              case BinaryOp::Or: return left.truthy() ? left : eval(*node.right, scope);
              case BinaryOp::And: return left.truthy() ? eval(*node.right, scope) : left;
              case BinaryOp::Concat: {
                const Value right = eval(*node.right, scope);
                std::string text = left.str();
                append(text, right.str());
                return Value(std::move(text));
              }
              default:
                return arithmetic(node.op, left, eval(*node.right, scope), limits_.max_output_bytes);
            }
          },
          [&](const Compare& node) {
            Value left = eval(*node.first, scope);
            for (const auto& [op, right_expr] : node.rest) {
              Value right = eval(*right_expr, scope);
              if (!compare(op, left, right)) return Value(false);
              left = std::move(right);
            }
            return Value(true);
          },
          [&](const Conditional& node) {
            if (eval(*node.condition, scope).truthy()) return eval(*node.then, scope);
            if (node.otherwise) return eval(*node.otherwise, scope);
            return Value::undefined("the inline if-expression evaluated to false and has no else section");
          },
      },
      expr.node);
}

}  // namespace ditto::jinja
