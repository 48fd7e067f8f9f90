// Recursive-descent parser for the Jinja subset (see parser.h; the class in parser_detail.h):
// parse_template and the statement rules (text, output, and the if / for / set / macro / call /
// filter / with / generation tags). The expression rules are in parser_expressions.cpp, with
// jinja2's precedence, so `messages|length - 1` is `(messages|length) - 1`.
#include "chat_template/parser.h"

#include <initializer_list>

#include <fmt/format.h>

#include "chat_template/parser_detail.h"
#include "chat_template/template_error.h"
#include "core/strings.h"

namespace surogate::chat_template {
namespace detail {

// ---- statements ----

// Parses until one of `end_tags` opens a block tag; leaves the parser after that tag's name.
StatementList Parser::parse_body(std::initializer_list<std::string_view> end_tags, std::string_view opener,
                                 int opener_line, std::string& found_end) {
  check_nesting();
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

StatementPointer Parser::parse_statement(const std::string& tag, int line,
                                         std::initializer_list<std::string_view> end_tags, std::string_view opener,
                                         int opener_line) {
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

StatementPointer Parser::parse_if(int line) {
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

AssignTarget Parser::parse_assign_target(bool allow_namespace_attribute) {
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

StatementPointer Parser::parse_for(int line) {
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

StatementPointer Parser::parse_set(int line) {
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

std::vector<MacroParameter> Parser::parse_parameters() {
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

StatementPointer Parser::parse_macro(int line) {
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

StatementPointer Parser::parse_call_block(int line) {
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

StatementPointer Parser::parse_filter_block(int line) {
  auto statement = std::make_unique<FilterBlockStatement>(line);
  statement->filters.push_back(parse_filter(nullptr));
  while (accept_operator("|")) statement->filters.push_back(parse_filter(nullptr));
  expect_block_end("filter");
  std::string found;
  statement->body = parse_body({"endfilter"}, "filter", line, found);
  expect_block_end("endfilter");
  return statement;
}

StatementPointer Parser::parse_with(int line) {
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

}  // namespace detail

StatementList parse_template(const std::vector<Token>& tokens, const std::string& source_name) {
  return detail::Parser(tokens, source_name).parse_all();
}

}  // namespace surogate::chat_template
