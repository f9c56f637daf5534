#pragma once
// Runs a parsed template: statements write text, expressions compute values, with jinja2's
// scoping (a for loop's body, a macro and a with block have their own scope; if does not).
#include <memory>
#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/value.h"
#include "ditto/chat_template.h"

namespace ditto::jinja {

class Interpreter {
 public:
  Interpreter(const Program& program, const RenderLimits& limits);
  ~Interpreter();

  // Renders with `variables` as the template's context. Throws TemplateError.
  std::string render(const Dict& variables);

  // For builtins: the size limit of strings and lists they build, and calling any callable.
  void check_size(size_t bytes) const;
  Value call(const Value& callee, CallArgs& args);
  // A namespace object, tracked so that reference cycles through namespaces are broken when
  // the render ends.
  std::shared_ptr<Object> make_namespace(Dict attributes);

 private:
  struct Scope {
    std::shared_ptr<Scope> parent;
    Dict variables;
    const Value* find(std::string_view name) const;
  };
  using ScopePtr = std::shared_ptr<Scope>;
  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  Flow exec_for(const For& loop, const ScopePtr& scope, std::string& out);
  void assign(const Target& target, Value value, const ScopePtr& scope);
  std::string render_block(const Body& body, const ScopePtr& scope);
  Value call_macro(const Macro& macro, Scope* defined_in, CallArgs& args);

  Value eval(const Expr& expr, const ScopePtr& scope);
  Value eval_node(const Expr& expr, const ScopePtr& scope);
  CallArgs eval_args(const Arguments& args, const ScopePtr& scope);
  Value apply_filter(const Filter& filter, const ScopePtr& scope);

  void append(std::string& out, std::string_view text) const;
  void step();

  struct DepthGuard;

  const Program& program_;
  RenderLimits limits_;
  size_t steps_ = 0;
  int depth_ = 0;
  Value block_text_;  // the input of the filters of a filter or set block
  // Scopes that macros were defined in, kept alive while the macros may be called.
  std::vector<ScopePtr> macro_scopes_;
  std::vector<std::shared_ptr<Object>> namespaces_;
};

}  // namespace ditto::jinja
