// The expression rules of the chat-template parser (parser_detail.h), loosest binding first:
// `x if c else y`, or, and, not, comparisons/in, + -, ~, * / // %, **, unary -, then postfix
// (attribute, subscript, call) followed by `|filter` and `is test`.
#include <charconv>
#include <cmath>

#include "chat_template/parser.h"
#include "chat_template/parser_detail.h"
#include "core/strings.h"

namespace surogate::chat_template::detail {

ExpressionPointer Parser::parse_tuple(bool with_condition) {
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

ExpressionPointer Parser::parse_expression(bool with_condition) {
  check_nesting();
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

ExpressionPointer Parser::binary(BinaryOperator op, ExpressionPointer left, ExpressionPointer right, int line) {
  // A chain `a + b + c + ...` nests to the left without recursing here; bound its length so that
  // evaluating (and destroying) the tree stays within the stack too.
  int chain = 1;
  if (left->kind == ExpressionKind::kBinary) chain = static_cast<const BinaryExpression&>(*left).chain + 1;
  if (chain > kMaxOperatorChain) {
    fail(fmt::format("an expression chains more than {} operators; split it", kMaxOperatorChain), line);
  }
  auto node = std::make_unique<BinaryExpression>(op, std::move(left), std::move(right), line);
  node->chain = chain;
  return node;
}

ExpressionPointer Parser::parse_or() {
  auto left = parse_and();
  while (is_name("or")) {
    int line = current().line;
    advance();
    left = binary(BinaryOperator::kOr, std::move(left), parse_and(), line);
  }
  return left;
}

ExpressionPointer Parser::parse_and() {
  auto left = parse_not();
  while (is_name("and")) {
    int line = current().line;
    advance();
    left = binary(BinaryOperator::kAnd, std::move(left), parse_not(), line);
  }
  return left;
}

ExpressionPointer Parser::parse_not() {
  check_nesting();
  if (is_name("not")) {
    int line = current().line;
    advance();
    return std::make_unique<UnaryExpression>(UnaryOperator::kNot, parse_not(), line);
  }
  return parse_compare();
}

ExpressionPointer Parser::parse_compare() {
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

ExpressionPointer Parser::parse_math1() {
  auto left = parse_concat();
  while (is_operator("+") || is_operator("-")) {
    int line = current().line;
    auto op = current().text == "+" ? BinaryOperator::kAdd : BinaryOperator::kSubtract;
    advance();
    left = binary(op, std::move(left), parse_concat(), line);
  }
  return left;
}

ExpressionPointer Parser::parse_concat() {
  auto left = parse_math2();
  while (is_operator("~")) {
    int line = current().line;
    advance();
    left = binary(BinaryOperator::kConcat, std::move(left), parse_math2(), line);
  }
  return left;
}

ExpressionPointer Parser::parse_math2() {
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

ExpressionPointer Parser::parse_power() {
  auto left = parse_unary(true);
  while (is_operator("**")) {
    int line = current().line;
    advance();
    left = binary(BinaryOperator::kPower, std::move(left), parse_unary(true), line);
  }
  return left;
}

ExpressionPointer Parser::parse_unary(bool with_filter) {
  check_nesting();
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

ExpressionPointer Parser::parse_primary() {
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

ExpressionPointer Parser::parse_postfix(ExpressionPointer node) {
  while (true) {
    int line = current().line;
    if (accept_operator(".")) {
      if (current().kind == TokenKind::kInteger) {
        // `x.0` is `x[0]`; the digits may not fit an int64 (`x.99999999999999999999`).
        int64_t index = 0;
        const std::string& digits = current().text;
        auto result = std::from_chars(digits.data(), digits.data() + digits.size(), index);
        if (result.ec != std::errc()) fail(fmt::format("the index .{} is too large", digits));
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

ExpressionPointer Parser::parse_subscript(ExpressionPointer object, int line) {
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

ArgumentExpressions Parser::parse_call_arguments() {
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

std::unique_ptr<FilterExpression> Parser::parse_filter(ExpressionPointer operand) {
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

ExpressionPointer Parser::parse_filters_and_tests(ExpressionPointer node) {
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

}  // namespace surogate::chat_template::detail
