// Recursive-descent parser for the Jinja subset (see parser.h). Precedence, loosest first:
// `x if c else y`, or, and, not, comparisons/in, + -, ~, * / // %, **, unary -, then postfix
// (attribute, subscript, call) followed by `|filter` and `is test`, exactly as jinja2 binds them
// (so `messages|length - 1` is `(messages|length) - 1`).
#include "chat_template/parser.h"

#include <charconv>
#include <cmath>
#include <initializer_list>

#include <fmt/format.h>

#include "chat_template/template_error.h"
#include "core/strings.h"

namespace surogate::chat_template {
namespace {

class Parser {
public:
  Parser(const std::vector<Token>& tokens, const std::string& source_name)
      : tokens_(tokens), source_name_(source_name) {}

  StatementList parse_all() {
    std::string found;
    StatementList body = parse_body({}, "", 0, found);
    return body;
  }

private:
  // ---- token helpers ----
  const Token& current() const { return tokens_[index_]; }
  const Token& peek(size_t ahead = 1) const { return tokens_[std::min(index_ + ahead, tokens_.size() - 1)]; }
  void advance() {
    if (index_ + 1 < tokens_.size()) ++index_;
  }
  bool is_operator(std::string_view op) const {
    return current().kind == TokenKind::kOperator && current().text == op;
  }
  bool is_name(std::string_view name) const { return current().kind == TokenKind::kName && current().text == name; }
  bool accept_operator(std::string_view op) {
    if (!is_operator(op)) return false;
    advance();
    return true;
  }
  bool accept_name(std::string_view name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }
  [[noreturn]] void fail(const std::string& message, int line = 0) const {
    fail_template(source_name_, line ? line : current().line, message);
  }
  std::string describe_current() const {
    switch (current().kind) {
      case TokenKind::kText:
        return "text";
      case TokenKind::kVariableBegin:
        return "'{{'";
      case TokenKind::kVariableEnd:
        return "'}}'";
      case TokenKind::kBlockBegin:
        return "'{%'";
      case TokenKind::kBlockEnd:
        return "'%}'";
      case TokenKind::kEnd:
        return "the end of the template";
      case TokenKind::kString:
        return "a string";
      default:
        return "'" + current().text + "'";
    }
  }
  void expect_operator(std::string_view op) {
    if (!accept_operator(op)) fail(fmt::format("expected '{}' but found {}", op, describe_current()));
  }
  void expect_block_end(std::string_view tag) {
    if (current().kind != TokenKind::kBlockEnd)
      fail(fmt::format("expected '%}}' to end the '{}' tag but found {}", tag, describe_current()));
    advance();
  }
  std::string expect_name(std::string_view what) {
    if (current().kind != TokenKind::kName) fail(fmt::format("expected {} but found {}", what, describe_current()));
    std::string name = current().text;
    advance();
    return name;
  }

  // ---- statements ----
  // Parses until one of `end_tags` opens a block tag; leaves the parser after that tag's name.
  StatementList parse_body(std::initializer_list<std::string_view> end_tags, std::string_view opener, int opener_line,
                           std::string& found_end) {
    StatementList body;
    while (true) {
      const Token& token = current();
      switch (token.kind) {
        case TokenKind::kText:
          body.push_back(std::make_unique<TextStatement>(token.text, token.line));
          advance();
          break;
        case TokenKind::kVariableBegin: {
          int line = token.line;
          advance();
          auto value = parse_tuple(true);
          if (current().kind != TokenKind::kVariableEnd)
            fail(fmt::format("expected '}}}}' but found {}", describe_current()));
          advance();
          body.push_back(std::make_unique<OutputStatement>(std::move(value), line));
          break;
        }
        case TokenKind::kBlockBegin: {
          int line = token.line;
          advance();
          if (current().kind != TokenKind::kName) fail(fmt::format("expected a tag name but found {}", describe_current()));
          std::string tag = current().text;
          for (std::string_view end : end_tags) {
            if (tag == end) {
              advance();
              found_end = tag;
              return body;
            }
          }
          advance();
          body.push_back(parse_statement(tag, line, end_tags, opener, opener_line));
          break;
        }
        case TokenKind::kEnd:
          if (end_tags.size() == 0) return body;
          fail(fmt::format("the '{{% {} %}}' tag at line {} is never closed (expected '{{% {} %}}')", opener,
                           opener_line, *(end_tags.end() - 1)));
        default:
          fail(fmt::format("unexpected {}", describe_current()));
      }
    }
  }

  StatementPointer parse_statement(const std::string& tag, int line, std::initializer_list<std::string_view> end_tags,
                                   std::string_view opener, int opener_line) {
    if (tag == "if") return parse_if(line);
    if (tag == "for") return parse_for(line);
    if (tag == "set") return parse_set(line);
    if (tag == "macro") return parse_macro(line);
    if (tag == "call") return parse_call_block(line);
    if (tag == "filter") return parse_filter_block(line);
    if (tag == "with") return parse_with(line);
    if (tag == "generation") {
      expect_block_end(tag);
      auto statement = std::make_unique<GenerationStatement>(line);
      std::string found;
      statement->body = parse_body({"endgeneration"}, "generation", line, found);
      expect_block_end("endgeneration");
      return statement;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(fmt::format("'{{% {} %}}' outside of a for loop", tag), line);
      expect_block_end(tag);
      return std::make_unique<SimpleStatement>(tag == "break" ? StatementKind::kBreak : StatementKind::kContinue, line);
    }
    static const std::vector<std::string> unsupported = {"include", "extends", "import", "from", "block",
                                                         "autoescape", "do", "trans", "pluralize", "debug"};
    for (const auto& name : unsupported)
      if (tag == name)
        fail(fmt::format("the Jinja tag '{{% {} %}}' is not supported in chat templates", tag), line);
    if (tag.starts_with("end") || tag == "else" || tag == "elif") {
      if (opener.empty()) fail(fmt::format("unexpected '{{% {} %}}' with no open block", tag), line);
      fail(fmt::format("unexpected '{{% {} %}}' inside the '{{% {} %}}' block at line {} (expected '{{% {} %}}')", tag,
                       opener, opener_line, *(end_tags.end() - 1)),
           line);
    }
    fail(fmt::format("unknown Jinja tag '{{% {} %}}'", tag), line);
  }

  StatementPointer parse_if(int line) {
    auto statement = std::make_unique<IfStatement>(line);
    auto condition = parse_expression(true);
    expect_block_end("if");
    while (true) {
      std::string found;
      StatementList body = parse_body({"elif", "else", "endif"}, "if", line, found);
      statement->branches.emplace_back(std::move(condition), std::move(body));
      if (found == "elif") {
        condition = parse_expression(true);
        expect_block_end("elif");
        continue;
      }
      if (found == "else") {
        expect_block_end("else");
        statement->else_body = parse_body({"endif"}, "if", line, found);
      }
      expect_block_end("endif");
      return statement;
    }
  }

  AssignTarget parse_assign_target(bool allow_namespace_attribute) {
    AssignTarget target;
    bool parenthesized = accept_operator("(");
    target.names.push_back(expect_name("a variable name"));
    if (allow_namespace_attribute && !parenthesized && accept_operator(".")) {
      target.namespace_attribute = expect_name("an attribute name");
      return target;
    }
    while (accept_operator(",")) {
      target.unpack = true;
      if (current().kind != TokenKind::kName) break;
      target.names.push_back(expect_name("a variable name"));
    }
    if (parenthesized) {
      target.unpack = true;
      expect_operator(")");
    }
    return target;
  }

  StatementPointer parse_for(int line) {
    auto statement = std::make_unique<ForStatement>(line);
    statement->target = parse_assign_target(false);
    if (!accept_name("in")) fail(fmt::format("expected 'in' in the for loop but found {}", describe_current()));
    statement->iterable = parse_tuple(false);
    if (accept_name("if")) statement->filter = parse_expression(true);
    if (is_name("recursive")) fail("recursive for loops ('{% for ... recursive %}') are not supported");
    expect_block_end("for");
    ++loop_depth_;
    std::string found;
    statement->body = parse_body({"else", "endfor"}, "for", line, found);
    --loop_depth_;
    if (found == "else") {
      expect_block_end("else");
      statement->else_body = parse_body({"endfor"}, "for", line, found);
    }
    expect_block_end("endfor");
    return statement;
  }

  StatementPointer parse_set(int line) {
    AssignTarget target = parse_assign_target(true);
    if (accept_operator("=")) {
      auto statement = std::make_unique<SetStatement>(line);
      statement->target = std::move(target);
      statement->value = parse_tuple(true);
      expect_block_end("set");
      return statement;
    }
    auto statement = std::make_unique<BlockSetStatement>(line);
    statement->target = std::move(target);
    while (accept_operator("|")) statement->filters.push_back(parse_filter(nullptr));
    expect_block_end("set");
    std::string found;
    int saved_depth = loop_depth_;
    statement->body = parse_body({"endset"}, "set", line, found);
    loop_depth_ = saved_depth;
    expect_block_end("endset");
    return statement;
  }

  std::vector<MacroParameter> parse_parameters() {
    std::vector<MacroParameter> parameters;
    expect_operator("(");
    while (!accept_operator(")")) {
      if (!parameters.empty()) expect_operator(",");
      if (accept_operator(")")) break;
      MacroParameter parameter;
      parameter.name = expect_name("a parameter name");
      if (accept_operator("=")) parameter.default_value = parse_expression(true);
      parameters.push_back(std::move(parameter));
    }
    return parameters;
  }

  StatementPointer parse_macro(int line) {
    auto statement = std::make_unique<MacroStatement>(line);
    statement->name = expect_name("a macro name");
    statement->parameters = parse_parameters();
    expect_block_end("macro");
    int saved_depth = loop_depth_;
    loop_depth_ = 0;
    std::string found;
    statement->body = parse_body({"endmacro"}, "macro", line, found);
    loop_depth_ = saved_depth;
    expect_block_end("endmacro");
    return statement;
  }

  StatementPointer parse_call_block(int line) {
    auto statement = std::make_unique<CallBlockStatement>(line);
    if (is_operator("(")) statement->caller_parameters = parse_parameters();
    auto call = parse_expression(true);
    if (call->kind != ExpressionKind::kCall) fail("'{% call %}' must be followed by a macro call", line);
    statement->call.reset(static_cast<CallExpression*>(call.release()));
    expect_block_end("call");
    int saved_depth = loop_depth_;
    loop_depth_ = 0;
    std::string found;
    statement->body = parse_body({"endcall"}, "call", line, found);
    loop_depth_ = saved_depth;
    expect_block_end("endcall");
    return statement;
  }

  StatementPointer parse_filter_block(int line) {
    auto statement = std::make_unique<FilterBlockStatement>(line);
    statement->filters.push_back(parse_filter(nullptr));
    while (accept_operator("|")) statement->filters.push_back(parse_filter(nullptr));
    expect_block_end("filter");
    std::string found;
    statement->body = parse_body({"endfilter"}, "filter", line, found);
    expect_block_end("endfilter");
    return statement;
  }

  StatementPointer parse_with(int line) {
    auto statement = std::make_unique<WithStatement>(line);
    while (current().kind != TokenKind::kBlockEnd) {
      if (!statement->assignments.empty()) expect_operator(",");
      std::string name = expect_name("a variable name");
      expect_operator("=");
      statement->assignments.emplace_back(std::move(name), parse_expression(true));
    }
    expect_block_end("with");
    std::string found;
    statement->body = parse_body({"endwith"}, "with", line, found);
    expect_block_end("endwith");
    return statement;
  }

  // ---- expressions ----
  ExpressionPointer parse_tuple(bool with_condition) {
    int line = current().line;
    auto first = parse_expression(with_condition);
    if (!is_operator(",")) return first;
    auto tuple = std::make_unique<ListExpression>(line);
    tuple->is_tuple = true;
    tuple->items.push_back(std::move(first));
    while (accept_operator(",")) {
      if (current().kind == TokenKind::kBlockEnd || current().kind == TokenKind::kVariableEnd || is_operator(")"))
        break;
      tuple->items.push_back(parse_expression(with_condition));
    }
    return tuple;
  }

  ExpressionPointer parse_expression(bool with_condition) {
    int line = current().line;
    auto value = parse_or();
    if (!with_condition) return value;
    while (is_name("if")) {
      advance();
      auto conditional = std::make_unique<ConditionalExpression>(line);
      conditional->then_value = std::move(value);
      conditional->condition = parse_or();
      if (accept_name("else")) conditional->else_value = parse_expression(true);
      value = std::move(conditional);
    }
    return value;
  }

  ExpressionPointer binary(BinaryOperator op, ExpressionPointer left, ExpressionPointer right, int line) {
    return std::make_unique<BinaryExpression>(op, std::move(left), std::move(right), line);
  }

  ExpressionPointer parse_or() {
    auto left = parse_and();
    while (is_name("or")) {
      int line = current().line;
      advance();
      left = binary(BinaryOperator::kOr, std::move(left), parse_and(), line);
    }
    return left;
  }

  ExpressionPointer parse_and() {
    auto left = parse_not();
    while (is_name("and")) {
      int line = current().line;
      advance();
      left = binary(BinaryOperator::kAnd, std::move(left), parse_not(), line);
    }
    return left;
  }

  ExpressionPointer parse_not() {
    if (is_name("not")) {
      int line = current().line;
      advance();
      return std::make_unique<UnaryExpression>(UnaryOperator::kNot, parse_not(), line);
    }
    return parse_compare();
  }

  ExpressionPointer parse_compare() {
    auto left = parse_math1();
    bool compared = false;
    while (true) {
      int line = current().line;
      std::optional<BinaryOperator> op;
      if (current().kind == TokenKind::kOperator) {
        const std::string& text = current().text;
        if (text == "==") op = BinaryOperator::kEqual;
        else if (text == "!=") op = BinaryOperator::kNotEqual;
        else if (text == "<") op = BinaryOperator::kLess;
        else if (text == "<=") op = BinaryOperator::kLessEqual;
        else if (text == ">") op = BinaryOperator::kGreater;
        else if (text == ">=") op = BinaryOperator::kGreaterEqual;
        if (op) advance();
      } else if (is_name("in")) {
        op = BinaryOperator::kIn;
        advance();
      } else if (is_name("not") && peek().kind == TokenKind::kName && peek().text == "in") {
        op = BinaryOperator::kNotIn;
        advance();
        advance();
      }
      if (!op) return left;
      if (compared) fail("chained comparisons such as 'a < b < c' are not supported; use 'a < b and b < c'", line);
      compared = true;
      left = binary(*op, std::move(left), parse_math1(), line);
    }
  }

  ExpressionPointer parse_math1() {
    auto left = parse_concat();
    while (is_operator("+") || is_operator("-")) {
      int line = current().line;
      auto op = current().text == "+" ? BinaryOperator::kAdd : BinaryOperator::kSubtract;
      advance();
      left = binary(op, std::move(left), parse_concat(), line);
    }
    return left;
  }

  ExpressionPointer parse_concat() {
    auto left = parse_math2();
    while (is_operator("~")) {
      int line = current().line;
      advance();
      left = binary(BinaryOperator::kConcat, std::move(left), parse_math2(), line);
    }
    return left;
  }

  ExpressionPointer parse_math2() {
    auto left = parse_power();
    while (is_operator("*") || is_operator("/") || is_operator("//") || is_operator("%")) {
      int line = current().line;
      const std::string& text = current().text;
      auto op = text == "*"    ? BinaryOperator::kMultiply
                : text == "/"  ? BinaryOperator::kDivide
                : text == "//" ? BinaryOperator::kFloorDivide
                               : BinaryOperator::kModulo;
      advance();
      left = binary(op, std::move(left), parse_power(), line);
    }
    return left;
  }

  ExpressionPointer parse_power() {
    auto left = parse_unary(true);
    while (is_operator("**")) {
      int line = current().line;
      advance();
      left = binary(BinaryOperator::kPower, std::move(left), parse_unary(true), line);
    }
    return left;
  }

  ExpressionPointer parse_unary(bool with_filter) {
    int line = current().line;
    ExpressionPointer node;
    if (accept_operator("-")) {
      node = std::make_unique<UnaryExpression>(UnaryOperator::kNegate, parse_unary(false), line);
    } else if (accept_operator("+")) {
      node = std::make_unique<UnaryExpression>(UnaryOperator::kPlus, parse_unary(false), line);
    } else {
      node = parse_postfix(parse_primary());
    }
    if (with_filter) node = parse_filters_and_tests(std::move(node));
    return node;
  }

  ExpressionPointer parse_primary() {
    const Token& token = current();
    int line = token.line;
    switch (token.kind) {
      case TokenKind::kName: {
        std::string name = token.text;
        advance();
        if (name == "true" || name == "True") return std::make_unique<LiteralExpression>(Value(true), line);
        if (name == "false" || name == "False") return std::make_unique<LiteralExpression>(Value(false), line);
        if (name == "none" || name == "None") return std::make_unique<LiteralExpression>(Value::none(), line);
        return std::make_unique<NameExpression>(std::move(name), line);
      }
      case TokenKind::kString: {
        std::string text = token.text;
        advance();
        while (current().kind == TokenKind::kString) {  // adjacent literals concatenate
          text += current().text;
          advance();
        }
        return std::make_unique<LiteralExpression>(Value(std::move(text)), line);
      }
      case TokenKind::kInteger: {
        int64_t value = 0;
        auto result = std::from_chars(token.text.data(), token.text.data() + token.text.size(), value);
        if (result.ec != std::errc()) fail(fmt::format("the integer literal {} is too large", token.text));
        advance();
        return std::make_unique<LiteralExpression>(Value(value), line);
      }
      case TokenKind::kFloat: {
        double value = std::strtod(token.text.c_str(), nullptr);
        advance();
        return std::make_unique<LiteralExpression>(Value(value), line);
      }
      case TokenKind::kOperator:
        if (token.text == "(") {
          advance();
          if (accept_operator(")")) {
            auto empty = std::make_unique<ListExpression>(line);
            empty->is_tuple = true;
            return empty;
          }
          auto inner = parse_tuple(true);
          expect_operator(")");
          return inner;
        }
        if (token.text == "[") {
          advance();
          auto list = std::make_unique<ListExpression>(line);
          while (!accept_operator("]")) {
            if (!list->items.empty()) expect_operator(",");
            if (accept_operator("]")) break;
            list->items.push_back(parse_expression(true));
          }
          return list;
        }
        if (token.text == "{") {
          advance();
          auto dict = std::make_unique<DictExpression>(line);
          while (!accept_operator("}")) {
            if (!dict->items.empty()) expect_operator(",");
            if (accept_operator("}")) break;
            auto key = parse_expression(true);
            expect_operator(":");
            dict->items.emplace_back(std::move(key), parse_expression(true));
          }
          return dict;
        }
        break;
      default:
        break;
    }
    fail(fmt::format("expected an expression but found {}", describe_current()));
  }

  ExpressionPointer parse_postfix(ExpressionPointer node) {
    while (true) {
      int line = current().line;
      if (accept_operator(".")) {
        if (current().kind == TokenKind::kInteger) {
          int64_t index = std::stoll(current().text);
          advance();
          node = std::make_unique<SubscriptExpression>(std::move(node),
                                                       std::make_unique<LiteralExpression>(Value(index), line), line);
        } else {
          node = std::make_unique<AttributeExpression>(std::move(node), expect_name("an attribute name"), line);
        }
      } else if (accept_operator("[")) {
        node = parse_subscript(std::move(node), line);
      } else if (is_operator("(")) {
        auto call = std::make_unique<CallExpression>(line);
        call->callee = std::move(node);
        call->arguments = parse_call_arguments();
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  ExpressionPointer parse_subscript(ExpressionPointer object, int line) {
    ExpressionPointer parts[3];
    int part = 0;
    bool is_slice = false;
    while (!is_operator("]")) {
      if (accept_operator(":")) {
        is_slice = true;
        if (++part > 2) fail("a slice takes at most three parts");
        continue;
      }
      if (parts[part]) fail(fmt::format("expected ']' but found {}", describe_current()));
      parts[part] = parse_expression(true);
    }
    expect_operator("]");
    if (!is_slice) {
      if (!parts[0]) fail("empty subscript '[]'", line);
      return std::make_unique<SubscriptExpression>(std::move(object), std::move(parts[0]), line);
    }
    auto slice = std::make_unique<SliceExpression>(line);
    slice->object = std::move(object);
    slice->start = std::move(parts[0]);
    slice->stop = std::move(parts[1]);
    slice->step = std::move(parts[2]);
    return slice;
  }

  ArgumentExpressions parse_call_arguments() {
    ArgumentExpressions arguments;
    expect_operator("(");
    bool first = true;
    while (!accept_operator(")")) {
      if (!first) expect_operator(",");
      first = false;
      if (accept_operator(")")) break;
      if (is_operator("*") || is_operator("**")) fail("'*args' and '**kwargs' in calls are not supported");
      if (current().kind == TokenKind::kName && peek().kind == TokenKind::kOperator && peek().text == "=") {
        std::string name = current().text;
        advance();
        advance();
        arguments.keyword.emplace_back(std::move(name), parse_expression(true));
      } else {
        if (!arguments.keyword.empty()) fail("a positional argument follows a keyword argument");
        arguments.positional.push_back(parse_expression(true));
      }
    }
    return arguments;
  }

  std::unique_ptr<FilterExpression> parse_filter(ExpressionPointer operand) {
    int line = current().line;
    auto filter = std::make_unique<FilterExpression>(line);
    filter->operand = std::move(operand);
    filter->name = expect_name("a filter name");
    filter->function = find_filter(filter->name);
    if (!filter->function) {
      auto suggestion = closest_match(filter->name, filter_names());
      fail(fmt::format("unknown filter '{}'{}", filter->name,
                       suggestion ? fmt::format(" (did you mean '{}'?)", *suggestion) : std::string()),
           line);
    }
    if (is_operator("(")) filter->arguments = parse_call_arguments();
    return filter;
  }

  ExpressionPointer parse_filters_and_tests(ExpressionPointer node) {
    while (true) {
      if (accept_operator("|")) {
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        int line = current().line;
        advance();
        auto test = std::make_unique<TestExpression>(line);
        test->operand = std::move(node);
        test->negated = accept_name("not");
        test->name = expect_name("a test name");
        test->function = find_test(test->name);
        if (!test->function) {
          auto suggestion = closest_match(test->name, test_names());
          fail(fmt::format("unknown test '{}'{}", test->name,
                           suggestion ? fmt::format(" (did you mean '{}'?)", *suggestion) : std::string()),
               line);
        }
        if (is_operator("(")) {
          test->arguments = parse_call_arguments();
        } else if ((current().kind == TokenKind::kName || current().kind == TokenKind::kString ||
                    current().kind == TokenKind::kInteger || current().kind == TokenKind::kFloat || is_operator("[") ||
                    is_operator("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if") && !is_name("in") &&
                   !is_name("not") && !is_name("is")) {
          test->arguments.positional.push_back(parse_postfix(parse_primary()));
        }
        node = std::move(test);
      } else if (is_operator("(") ) {
        int line = current().line;
        auto call = std::make_unique<CallExpression>(line);
        call->callee = std::move(node);
        call->arguments = parse_call_arguments();
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  const std::vector<Token>& tokens_;
  const std::string& source_name_;
  size_t index_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

StatementList parse_template(const std::vector<Token>& tokens, const std::string& source_name) {
  return Parser(tokens, source_name).parse_all();
}

}  // namespace surogate::chat_template
