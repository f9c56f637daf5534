#include "chat/parser.h"

#include <algorithm>

#include "chat/builtins.h"
#include "ditto/chat_template.h"

namespace ditto::jinja {

namespace {

// Deeper nesting than this is refused, so that neither the parser nor the interpreter can run
// out of stack.
constexpr int kMaxNesting = 256;

// Tags of Jinja that chat templates do not need and ditto does not implement.
constexpr std::string_view kUnsupportedTags[] = {"block", "extends", "include", "import", "from",
                                                 "call", "autoescape"};

std::string describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::Data: return "template text";
    case TokenKind::VariableBegin: return "'{{'";
    case TokenKind::VariableEnd: return "'}}'";
    case TokenKind::BlockBegin: return "'{%'";
    case TokenKind::BlockEnd: return "'%}'";
    case TokenKind::Name:
    case TokenKind::Integer:
    case TokenKind::Float: return "'" + token.text + "'";
    case TokenKind::String: return "a string";
    case TokenKind::Operator: return "'" + token.text + "'";
    case TokenKind::End: return "the end of the template";
  }
  return "?";
}

template <typename Node>
ExprPtr make(Location where, Node node) {
  return std::make_unique<Expr>(Expr{where, std::move(node)});
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  std::unique_ptr<Program> run() {
    auto program = std::make_unique<Program>();
    program->body = subparse({});
    if (!unknown_.empty()) throw unknown_.front();
    return program;
  }

 private:
  // --- the token stream

  const Token& current() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& advance() {
    const Token& token = tokens_[pos_];
    if (token.kind != TokenKind::End) ++pos_;
    return token;
  }
  bool is_name(std::string_view name) const {
    return current().kind == TokenKind::Name && current().text == name;
  }
  bool is_op(std::string_view op) const {
    return current().kind == TokenKind::Operator && current().text == op;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }

  [[noreturn]] void fail(const std::string& reason, Location where) const {
    throw TemplateError(reason, where.line, where.column);
  }
  [[noreturn]] void fail_here(const std::string& reason) const { fail(reason, current().where); }

  const Token& expect_kind(TokenKind kind, const std::string& what) {
    if (current().kind != kind) fail_here("expected " + what + ", got " + describe(current()));
    return advance();
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail_here("expected '" + std::string(op) + "', got " + describe(current()));
  }
  std::string expect_name() { return expect_kind(TokenKind::Name, "a name").text; }

  // A name that can be assigned: not one of the constants true, false and none.
  std::string expect_assignable_name() {
    static constexpr std::string_view kConstants[] = {"true", "false", "none", "True", "False", "None"};
    const Token& token = current();
    if (token.kind != TokenKind::Name ||
        std::find(std::begin(kConstants), std::end(kConstants), token.text) != std::end(kConstants)) {
      fail_here("cannot assign to " + describe(token));
    }
    return advance().text;
  }

  // Counts the levels of the tree being built: nested statements and expressions, and each
  // link of a chain such as a + b + c or x|f|g (which nests to the left).
  struct NestingGuard {
    // One level now (a nested statement or expression), or none yet (a chain).
    explicit NestingGuard(Parser& parser, bool chain = false) : parser(parser) {
      if (!chain) deeper();
    }
    void deeper() {
      ++levels;
      if (++parser.nesting_ > kMaxNesting) {
        parser.fail_here("the template nests more than " + std::to_string(kMaxNesting) + " levels deep");
      }
    }
    ~NestingGuard() { parser.nesting_ -= levels; }
    Parser& parser;
    int levels = 0;
  };

  // Sets a flag for the duration of a scope.
  struct Flag {
    Flag(bool& flag, bool value) : flag(flag), saved(flag) { flag = value; }
    ~Flag() { flag = saved; }
    bool& flag;
    bool saved;
  };

  // --- statements

  // Statements up to a block tag named in `end_tags` (left as the current token) or the end.
  Body subparse(const std::vector<std::string_view>& end_tags) {
    Body body;
    while (current().kind != TokenKind::End) {
      const Token& token = current();
      if (token.kind == TokenKind::Data) {
        body.push_back(Stmt{token.where, Text{token.text}});
        advance();
      } else if (token.kind == TokenKind::VariableBegin) {
        advance();
        ExprPtr value = parse_tuple();
        expect_kind(TokenKind::VariableEnd, "'}}'");
        body.push_back(Stmt{value->where, Output{std::move(value)}});
      } else if (token.kind == TokenKind::BlockBegin) {
        advance();
        if (current().kind == TokenKind::Name &&
            std::find(end_tags.begin(), end_tags.end(), current().text) != end_tags.end()) {
          return body;
        }
        parse_statement(body);
        expect_kind(TokenKind::BlockEnd, "'%}'");
      } else {
        fail_here("unexpected " + describe(token));
      }
    }
    return body;
  }

  // The body of a block statement up to one of `end_tags`; the end tag is left current.
  Body parse_statements(const std::vector<std::string_view>& end_tags, std::string_view opening,
                        Location opened_at) {
    skip_op(":");
    expect_kind(TokenKind::BlockEnd, "'%}'");
    Body body = subparse(end_tags);
    if (current().kind == TokenKind::End) {
      std::string expected;
      for (size_t i = 0; i < end_tags.size(); ++i) {
        expected += (i == 0 ? "'" : " or '") + std::string(end_tags[i]) + "'";
      }
      fail("unclosed '" + std::string(opening) + "': expected " + expected +
               " before the end of the template",
           opened_at);
    }
    return body;
  }

  // Like parse_statements, and consumes the end tag.
  Body parse_block(std::string_view end_tag, std::string_view opening, Location opened_at) {
    Body body = parse_statements({end_tag}, opening, opened_at);
    advance();
    return body;
  }

  void parse_statement(Body& body) {
    NestingGuard guard(*this);
    const Token& token = current();
    if (token.kind != TokenKind::Name) fail_here("expected a tag name, got " + describe(token));
    const std::string tag = token.text;
    const Location where = token.where;
    advance();
    if (tag == "for") {
      body.push_back(Stmt{where, parse_for(where)});
    } else if (tag == "if") {
      body.push_back(Stmt{where, parse_if(where)});
    } else if (tag == "set") {
      body.push_back(parse_set(where));
    } else if (tag == "macro") {
      body.push_back(Stmt{where, parse_macro(where)});
    } else if (tag == "with") {
      body.push_back(Stmt{where, parse_with(where)});
    } else if (tag == "filter") {
      body.push_back(Stmt{where, parse_filter_block(where)});
    } else if (tag == "generation") {
      // transformers' AssistantTracker: the body renders as it is, in a scope of its own.
      Flag soft(soft_, false);
      Flag loop(in_loop_, false);
      body.push_back(Stmt{where, Scoped{{}, parse_block("endgeneration", tag, where)}});
    } else if (tag == "print") {
      for (bool first = true; current().kind != TokenKind::BlockEnd; first = false) {
        if (!first) expect_op(",");
        ExprPtr value = parse_expression();
        body.push_back(Stmt{value->where, Output{std::move(value)}});
      }
    } else if (tag == "break" || tag == "continue") {
      if (!in_loop_) fail("'" + tag + "' outside a for loop", where);
      body.push_back(tag == "break" ? Stmt{where, Break{}} : Stmt{where, Continue{}});
    } else if (std::find(std::begin(kUnsupportedTags), std::end(kUnsupportedTags), tag) !=
               std::end(kUnsupportedTags)) {
      fail("the '" + tag + "' tag is not supported in chat templates", where);
    } else {
      fail("unknown tag '" + tag + "'", where);
    }
  }

  For parse_for(Location where) {
    For node;
    node.target = parse_assign_target({"in"}, false);
    if (!skip_name("in")) fail_here("expected 'in', got " + describe(current()));
    node.iterable = parse_tuple(false, {"recursive"});
    Flag soft(soft_, false);
    if (skip_name("if")) node.filter = parse_expression();
    if (is_name("recursive")) fail_here("recursive loops are not supported");
    {
      Flag loop(in_loop_, true);
      node.body = parse_statements({"endfor", "else"}, "for", where);
    }
    if (advance().text == "else") node.otherwise = parse_block("endfor", "for", where);
    return node;
  }

  If parse_if(Location where) {
    Flag soft(soft_, true);
    If node;
    while (true) {
      ExprPtr test = parse_tuple(false);
      Body body = parse_statements({"elif", "else", "endif"}, "if", where);
      node.branches.emplace_back(std::move(test), std::move(body));
      const std::string tag = advance().text;
      if (tag == "elif") continue;
      if (tag == "else") node.otherwise = parse_block("endif", "if", where);
      return node;
    }
  }

  Stmt parse_set(Location where) {
    Target target = parse_assign_target({}, true);
    if (skip_op("=")) return Stmt{where, Set{std::move(target), parse_tuple()}};
    Flag soft(soft_, false);
    Flag loop(in_loop_, false);
    ExprPtr filter = parse_filter_chain(nullptr, false);
    return Stmt{where, SetBlock{std::move(target), std::move(filter), parse_block("endset", "set", where)}};
  }

  Macro parse_macro(Location where) {
    Macro node;
    node.name = expect_assignable_name();
    Flag soft(soft_, false);
    Flag loop(in_loop_, false);
    expect_op("(");
    while (!is_op(")")) {
      if (!node.params.empty()) expect_op(",");
      node.params.push_back(expect_assignable_name());
      if (skip_op("=")) {
        node.defaults.push_back(parse_expression());
      } else if (!node.defaults.empty()) {
        fail_here("non-default argument follows default argument");
      }
    }
    expect_op(")");
    const bool outer_varargs = saw_varargs_, outer_kwargs = saw_kwargs_;
    saw_varargs_ = saw_kwargs_ = false;
    node.body = parse_block("endmacro", "macro", where);
    node.uses_varargs = saw_varargs_;
    node.uses_kwargs = saw_kwargs_;
    saw_varargs_ = saw_varargs_ || outer_varargs;
    saw_kwargs_ = saw_kwargs_ || outer_kwargs;
    return node;
  }

  Scoped parse_with(Location where) {
    Scoped node;
    while (current().kind != TokenKind::BlockEnd) {
      if (!node.assignments.empty()) expect_op(",");
      Target target = parse_assign_target({}, false);
      expect_op("=");
      node.assignments.emplace_back(std::move(target), parse_expression());
    }
    Flag soft(soft_, false);
    node.body = parse_block("endwith", "with", where);
    return node;
  }

  FilterBlock parse_filter_block(Location where) {
    Flag soft(soft_, false);
    Flag loop(in_loop_, false);
    FilterBlock node;
    node.filter = parse_filter_chain(nullptr, true);
    node.body = parse_block("endfilter", "filter", where);
    return node;
  }

  // Names (or one namespace.attribute when `with_namespace`), as in jinja2's
  // parse_assign_target.
  Target parse_assign_target(const std::vector<std::string_view>& extra_end, bool with_namespace) {
    std::vector<std::string> names;
    bool tuple = false;
    while (true) {
      if (!names.empty()) expect_op(",");
      if (tuple_ends(extra_end)) break;
      names.push_back(expect_assignable_name());
      if (with_namespace && is_op(".")) {
        advance();
        std::string attribute = expect_name();
        if (tuple || is_op(",")) fail_here("a namespace attribute cannot be assigned together with other names");
        return Target{Target::Kind::NamespaceAttribute, std::move(names), std::move(attribute)};
      }
      if (!is_op(",")) break;
      tuple = true;
    }
    if (names.empty()) fail_here("expected a name to assign to, got " + describe(current()));
    return Target{tuple ? Target::Kind::Unpack : Target::Kind::Name, std::move(names), {}};
  }

  // --- expressions, by jinja2's precedence: conditional, or, and, not, comparison, + -, ~,
  // * / // %, **, unary - +, then primaries with their postfixes, filters and tests.

  bool tuple_ends(const std::vector<std::string_view>& extra_end) const {
    const TokenKind kind = current().kind;
    if (kind == TokenKind::VariableEnd || kind == TokenKind::BlockEnd || kind == TokenKind::End || is_op(")")) {
      return true;
    }
    return current().kind == TokenKind::Name &&
           std::find(extra_end.begin(), extra_end.end(), current().text) != extra_end.end();
  }

  // Expressions separated by commas make a tuple; one without a comma is itself.
  ExprPtr parse_tuple(bool with_condexpr = true, const std::vector<std::string_view>& extra_end = {},
                      bool explicit_parentheses = false) {
    const Location where = current().where;
    std::vector<ExprPtr> items;
    bool tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (tuple_ends(extra_end)) break;
      items.push_back(with_condexpr ? parse_expression() : parse_or());
      if (is_op(",")) {
        tuple = true;
      } else {
        break;
      }
    }
    if (!tuple) {
      if (!items.empty()) return std::move(items.front());
      if (!explicit_parentheses) fail_here("expected an expression, got " + describe(current()));
    }
    return make(where, SequenceLiteral{std::move(items), true});
  }

  ExprPtr parse_expression() {
    NestingGuard guard(*this);
    return parse_condexpr();
  }

  ExprPtr parse_condexpr() {
    NestingGuard chain(*this, true);
    const size_t unknown_before = unknown_.size();
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      chain.deeper();
      const Location where = current().where;
      advance();
      // Unknown filters and tests anywhere in a conditional expression fail only when reached.
      unknown_.erase(unknown_.begin() + static_cast<std::ptrdiff_t>(unknown_before), unknown_.end());
      Flag soft(soft_, true);
      ExprPtr condition = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
      expr = make(where, Conditional{std::move(condition), std::move(expr), std::move(otherwise)});
    }
    return expr;
  }

  ExprPtr parse_or() {
    NestingGuard chain(*this, true);
    ExprPtr left = parse_and();
    while (is_name("or")) {
      chain.deeper();
      const Location where = advance().where;
      left = make(where, Binary{BinaryOp::Or, std::move(left), parse_and()});
    }
    return left;
  }

  ExprPtr parse_and() {
    NestingGuard chain(*this, true);
    ExprPtr left = parse_not();
    while (is_name("and")) {
      chain.deeper();
      const Location where = advance().where;
      left = make(where, Binary{BinaryOp::And, std::move(left), parse_not()});
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      NestingGuard guard(*this);
      const Location where = advance().where;
      return make(where, Unary{UnaryOp::Not, parse_not()});
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Location where = current().where;
    ExprPtr first = parse_math1();
    std::vector<std::pair<CompareOp, ExprPtr>> rest;
    while (true) {
      static const std::pair<std::string_view, CompareOp> kOperators[] = {
          {"==", CompareOp::Equal}, {"!=", CompareOp::NotEqual}, {"<", CompareOp::Less},
          {"<=", CompareOp::LessEqual}, {">", CompareOp::Greater}, {">=", CompareOp::GreaterEqual}};
      auto op = std::find_if(std::begin(kOperators), std::end(kOperators),
                             [&](const auto& entry) { return is_op(entry.first); });
      if (op != std::end(kOperators)) {
        advance();
        rest.emplace_back(op->second, parse_math1());
      } else if (skip_name("in")) {
        rest.emplace_back(CompareOp::In, parse_math1());
      } else if (is_name("not") && look().kind == TokenKind::Name && look().text == "in") {
        advance();
        advance();
        rest.emplace_back(CompareOp::NotIn, parse_math1());
      } else {
        break;
      }
    }
    if (rest.empty()) return first;
    return make(where, Compare{std::move(first), std::move(rest)});
  }

  ExprPtr parse_math1() {
    NestingGuard chain(*this, true);
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      chain.deeper();
      const BinaryOp op = current().text == "+" ? BinaryOp::Add : BinaryOp::Subtract;
      const Location where = advance().where;
      left = make(where, Binary{op, std::move(left), parse_concat()});
    }
    return left;
  }

  ExprPtr parse_concat() {
    NestingGuard chain(*this, true);
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      chain.deeper();
      const Location where = advance().where;
      left = make(where, Binary{BinaryOp::Concat, std::move(left), parse_math2()});
    }
    return left;
  }

  ExprPtr parse_math2() {
    NestingGuard chain(*this, true);
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain.deeper();
      const std::string& text = current().text;
      const BinaryOp op = text == "*" ? BinaryOp::Multiply
                          : text == "/" ? BinaryOp::Divide
                          : text == "//" ? BinaryOp::FloorDivide
                                         : BinaryOp::Modulo;
      const Location where = advance().where;
      left = make(where, Binary{op, std::move(left), parse_pow()});
    }
    return left;
  }

  ExprPtr parse_pow() {
    NestingGuard chain(*this, true);
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      chain.deeper();
      const Location where = advance().where;
      left = make(where, Binary{BinaryOp::Power, std::move(left), parse_unary(true)});
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    NestingGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const UnaryOp op = current().text == "-" ? UnaryOp::Negate : UnaryOp::Plus;
      const Location where = advance().where;
      node = make(where, Unary{op, parse_unary(false)});
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& token = current();
    const Location where = token.where;
    switch (token.kind) {
      case TokenKind::Name: {
        advance();
        if (token.text == "true" || token.text == "True") return make(where, Literal{Value(true)});
        if (token.text == "false" || token.text == "False") return make(where, Literal{Value(false)});
        if (token.text == "none" || token.text == "None") return make(where, Literal{Value()});
        saw_varargs_ = saw_varargs_ || token.text == "varargs";
        saw_kwargs_ = saw_kwargs_ || token.text == "kwargs";
        return make(where, Name{token.text});
      }
      case TokenKind::String: {
        std::string text;
        while (current().kind == TokenKind::String) text += advance().text;  // 'a' 'b' is 'ab'
        return make(where, Literal{Value(std::move(text))});
      }
      case TokenKind::Integer:
        advance();
        return make(where, Literal{Value(token.integer)});
      case TokenKind::Float:
        advance();
        return make(where, Literal{Value(token.number)});
      case TokenKind::Operator:
        if (token.text == "(") {
          advance();
          ExprPtr inner = parse_tuple(true, {}, true);
          expect_op(")");
          return inner;
        }
        if (token.text == "[") return parse_list();
        if (token.text == "{") return parse_dict();
        break;
      default:
        break;
    }
    fail_here("unexpected " + describe(token));
  }

  ExprPtr parse_list() {
    const Location where = advance().where;
    std::vector<ExprPtr> items;
    while (!is_op("]")) {
      if (!items.empty()) expect_op(",");
      if (is_op("]")) break;
      items.push_back(parse_expression());
    }
    expect_op("]");
    return make(where, SequenceLiteral{std::move(items), false});
  }

  ExprPtr parse_dict() {
    const Location where = advance().where;
    std::vector<std::pair<ExprPtr, ExprPtr>> entries;
    while (!is_op("}")) {
      if (!entries.empty()) expect_op(",");
      if (is_op("}")) break;
      ExprPtr key = parse_expression();
      expect_op(":");
      entries.emplace_back(std::move(key), parse_expression());
    }
    expect_op("}");
    return make(where, DictLiteral{std::move(entries)});
  }

  ExprPtr parse_postfix(ExprPtr node) {
    NestingGuard chain(*this, true);
    while (true) {
      if (is_op(".") || is_op("[")) {
        chain.deeper();
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        chain.deeper();
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    NestingGuard chain(*this, true);
    while (true) {
      if (is_op("|") || is_name("is") || is_op("(")) chain.deeper();
      if (is_op("|")) {
        node = parse_filter_chain(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& token = advance();
    const Location where = token.where;
    if (token.text == ".") {
      const Token& attribute = advance();
      if (attribute.kind == TokenKind::Name) return make(where, GetAttr{std::move(node), attribute.text});
      if (attribute.kind != TokenKind::Integer) fail("expected a name or a number after '.'", attribute.where);
      return make(where, GetItem{std::move(node), make(attribute.where, Literal{Value(attribute.integer)})});
    }
    // [index], [start:stop:step], or several indices: [a, b] is a tuple index.
    std::vector<std::vector<ExprPtr>> subscripts;  // one part, or three for a slice
    while (!is_op("]")) {
      if (!subscripts.empty()) expect_op(",");
      subscripts.push_back(parse_subscribed());
    }
    expect_op("]");
    if (subscripts.size() == 1) {
      std::vector<ExprPtr>& parts = subscripts.front();
      if (parts.size() == 1) return make(where, GetItem{std::move(node), std::move(parts[0])});
      return make(where, Slice{std::move(node), std::move(parts[0]), std::move(parts[1]), std::move(parts[2])});
    }
    std::vector<ExprPtr> items;
    for (auto& parts : subscripts) {
      if (parts.size() != 1) fail("slices among several indices are not supported", where);
      items.push_back(std::move(parts[0]));
    }
    return make(where, GetItem{std::move(node), make(where, SequenceLiteral{std::move(items), true})});
  }

  // An index, or the start, stop and step of a slice (each may be null).
  std::vector<ExprPtr> parse_subscribed() {
    std::vector<ExprPtr> parts;
    if (skip_op(":")) {
      parts.push_back(nullptr);
    } else {
      parts.push_back(parse_expression());
      if (!skip_op(":")) return parts;
    }
    parts.push_back(is_op(":") || is_op("]") || is_op(",") ? nullptr : parse_expression());
    parts.push_back(skip_op(":") && !is_op("]") && !is_op(",") ? parse_expression() : nullptr);
    return parts;
  }

  Arguments parse_call_args() {
    const Location where = current().where;
    expect_op("(");
    Arguments args;
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        expect_op(",");
        if (is_op(")")) break;  // a trailing comma
      }
      first = false;
      if (is_op("*") || is_op("**")) fail_here("*args and **kwargs in calls are not supported");
      if (current().kind == TokenKind::Name && look().kind == TokenKind::Operator && look().text == "=") {
        std::string key = advance().text;
        advance();
        args.keyword.emplace_back(std::move(key), parse_expression());
      } else {
        if (!args.keyword.empty()) fail("a positional argument follows a keyword argument", where);
        args.positional.push_back(parse_expression());
      }
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_call(ExprPtr callee) {
    const Location where = callee->where;
    Arguments args = parse_call_args();
    return make(where, Call{std::move(callee), std::move(args)});
  }

  // Dotted names, as jinja2 reads filter and test names.
  std::string parse_dotted_name() {
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    return name;
  }

  void note_unknown(const std::string& reason, Location where) {
    if (!soft_) unknown_.emplace_back(reason, where.line, where.column);
  }

  // `| f(args) | g ...` applied to `node` (null: the text of a filter or set block). With
  // `start_inline`, the first filter has no pipe before it.
  ExprPtr parse_filter_chain(ExprPtr node, bool start_inline) {
    NestingGuard chain(*this, true);
    while (is_op("|") || start_inline) {
      chain.deeper();
      if (!start_inline) advance();
      start_inline = false;
      const Location where = current().where;
      std::string name = parse_dotted_name();
      Arguments args;
      if (is_op("(")) args = parse_call_args();
      const FilterFn function = find_filter(name);
      if (function == nullptr) note_unknown(unknown_filter_reason(name), where);
      node = make(where, Filter{std::move(node), std::move(name), function, std::move(args)});
    }
    return node;
  }

  static std::string unknown_filter_reason(const std::string& name) {
    return is_unsupported_filter(name) ? "the filter '" + name + "' is not supported"
                                       : "no filter named '" + name + "'";
  }

  ExprPtr parse_test(ExprPtr node) {
    const Location where = advance().where;  // 'is'
    const bool negated = skip_name("not");
    const Location name_at = current().where;
    std::string name = parse_dotted_name();
    Arguments args;
    if (is_op("(")) {
      args = parse_call_args();
    } else if ((current().kind == TokenKind::Name || current().kind == TokenKind::String ||
                current().kind == TokenKind::Integer || current().kind == TokenKind::Float ||
                is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      // `x is divisibleby 3`: one argument without parentheses.
      if (is_name("is")) fail_here("tests cannot be chained with 'is'");
      args.positional.push_back(parse_postfix(parse_primary()));
    }
    const TestFn function = find_test(name);
    if (function == nullptr) note_unknown("no test named '" + name + "'", name_at);
    ExprPtr test = make(where, Test{std::move(node), std::move(name), function, std::move(args)});
    if (negated) test = make(where, Unary{UnaryOp::Not, std::move(test)});
    return test;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int nesting_ = 0;
  // Inside an `if` or a conditional expression, where jinja2 lets unknown filters and tests
  // pass until they are reached; elsewhere they are errors, reported after the whole template
  // parses (as jinja2 reports them when it compiles).
  bool soft_ = false;
  std::vector<TemplateError> unknown_;
  bool in_loop_ = false;  // break and continue are allowed
  bool saw_varargs_ = false, saw_kwargs_ = false;  // names read in the current macro body
};

}  // namespace

std::unique_ptr<Program> parse(std::string_view source) { return Parser(tokenize(source)).run(); }

}  // namespace ditto::jinja
