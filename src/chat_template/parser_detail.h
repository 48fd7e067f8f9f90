// The recursive-descent parser behind parse_template (parser.h): the token helpers here, the
// statement rules in parser.cpp and the expression rules in parser_expressions.cpp. Internal to
// chat_template; see parser.cpp for the precedence it implements.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "chat_template/ast.h"
#include "chat_template/lexer.h"
#include "chat_template/template_error.h"

#include "chat_template/stack_guard.h"

namespace surogate::chat_template::detail {

// The longest chain of binary operators one expression may hold (see Parser::binary).
inline constexpr int kMaxOperatorChain = 1000;

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

  // ---- statements (parser.cpp) ----
  // Parses until one of `end_tags` opens a block tag; leaves the parser after that tag's name.
  StatementList parse_body(std::initializer_list<std::string_view> end_tags, std::string_view opener, int opener_line,
                           std::string& found_end);
  StatementPointer parse_statement(const std::string& tag, int line, std::initializer_list<std::string_view> end_tags,
                                   std::string_view opener, int opener_line);
  StatementPointer parse_if(int line);
  AssignTarget parse_assign_target(bool allow_namespace_attribute);
  StatementPointer parse_for(int line);
  StatementPointer parse_set(int line);
  std::vector<MacroParameter> parse_parameters();
  StatementPointer parse_macro(int line);
  StatementPointer parse_call_block(int line);
  StatementPointer parse_filter_block(int line);
  StatementPointer parse_with(int line);

  // ---- expressions (parser_expressions.cpp) ----
  ExpressionPointer parse_tuple(bool with_condition);
  ExpressionPointer parse_expression(bool with_condition);
  ExpressionPointer binary(BinaryOperator op, ExpressionPointer left, ExpressionPointer right, int line);
  ExpressionPointer parse_or();
  ExpressionPointer parse_and();
  ExpressionPointer parse_not();
  ExpressionPointer parse_compare();
  ExpressionPointer parse_math1();
  ExpressionPointer parse_concat();
  ExpressionPointer parse_math2();
  ExpressionPointer parse_power();
  ExpressionPointer parse_unary(bool with_filter);
  ExpressionPointer parse_primary();
  ExpressionPointer parse_postfix(ExpressionPointer node);
  ExpressionPointer parse_subscript(ExpressionPointer object, int line);
  ArgumentExpressions parse_call_arguments();
  std::unique_ptr<FilterExpression> parse_filter(ExpressionPointer operand);
  ExpressionPointer parse_filters_and_tests(ExpressionPointer node);

  // Fails (naming the line) when nesting has used up the parser's stack budget.
  void check_nesting() const {
    if (stack_.exhausted()) fail("the template nests blocks or expressions too deeply");
  }

  const std::vector<Token>& tokens_;
  StackGuard stack_;
  const std::string& source_name_;
  size_t index_ = 0;
  int loop_depth_ = 0;
};

}  // namespace surogate::chat_template::detail
