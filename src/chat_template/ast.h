// The parsed form of a template: expressions and statements. Filters and tests are resolved to
// their functions at parse time, so an unknown filter is reported before anything renders and
// rendering does no name lookups for them.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat_template/value.h"

namespace surogate::chat_template {

struct Expression;
struct Statement;
using ExpressionPointer = std::unique_ptr<Expression>;
using StatementPointer = std::unique_ptr<Statement>;
using StatementList = std::vector<StatementPointer>;

// Positional and keyword arguments, evaluated.
struct CallArguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Evaluator;
using FilterFunction = Value (*)(Evaluator&, const Value& input, CallArguments& arguments, int line);
using TestFunction = bool (*)(Evaluator&, const Value& input, CallArguments& arguments, int line);

enum class ExpressionKind { kLiteral, kName, kList, kDict, kUnary, kBinary, kConditional, kAttribute, kSubscript,
                            kSlice, kCall, kFilter, kTest };

struct Expression {
  ExpressionKind kind;
  int line;
  Expression(ExpressionKind kind_, int line_) : kind(kind_), line(line_) {}
  virtual ~Expression() = default;
};

struct ArgumentExpressions {
  std::vector<ExpressionPointer> positional;
  std::vector<std::pair<std::string, ExpressionPointer>> keyword;
};

struct LiteralExpression : Expression {
  Value value;
  LiteralExpression(Value value_, int line_) : Expression(ExpressionKind::kLiteral, line_), value(std::move(value_)) {}
};

struct NameExpression : Expression {
  std::string name;
  NameExpression(std::string name_, int line_) : Expression(ExpressionKind::kName, line_), name(std::move(name_)) {}
};

struct ListExpression : Expression {
  std::vector<ExpressionPointer> items;
  bool is_tuple = false;
  explicit ListExpression(int line_) : Expression(ExpressionKind::kList, line_) {}
};

struct DictExpression : Expression {
  std::vector<std::pair<ExpressionPointer, ExpressionPointer>> items;
  explicit DictExpression(int line_) : Expression(ExpressionKind::kDict, line_) {}
};

enum class UnaryOperator { kNot, kNegate, kPlus };
struct UnaryExpression : Expression {
  UnaryOperator op;
  ExpressionPointer operand;
  UnaryExpression(UnaryOperator op_, ExpressionPointer operand_, int line_)
      : Expression(ExpressionKind::kUnary, line_), op(op_), operand(std::move(operand_)) {}
};

enum class BinaryOperator { kAdd, kSubtract, kMultiply, kDivide, kFloorDivide, kModulo, kPower, kConcat, kEqual,
                            kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual, kIn, kNotIn, kAnd, kOr };
struct BinaryExpression : Expression {
  BinaryOperator op;
  ExpressionPointer left;
  ExpressionPointer right;
  int chain = 1;  // binary operators nested to the left through `left`, this one included
  BinaryExpression(BinaryOperator op_, ExpressionPointer left_, ExpressionPointer right_, int line_)
      : Expression(ExpressionKind::kBinary, line_), op(op_), left(std::move(left_)), right(std::move(right_)) {}
};

// `then_value if condition else else_value`; a missing else yields undefined.
struct ConditionalExpression : Expression {
  ExpressionPointer condition;
  ExpressionPointer then_value;
  ExpressionPointer else_value;
  explicit ConditionalExpression(int line_) : Expression(ExpressionKind::kConditional, line_) {}
};

struct AttributeExpression : Expression {
  ExpressionPointer object;
  std::string name;
  AttributeExpression(ExpressionPointer object_, std::string name_, int line_)
      : Expression(ExpressionKind::kAttribute, line_), object(std::move(object_)), name(std::move(name_)) {}
};

struct SubscriptExpression : Expression {
  ExpressionPointer object;
  ExpressionPointer index;
  SubscriptExpression(ExpressionPointer object_, ExpressionPointer index_, int line_)
      : Expression(ExpressionKind::kSubscript, line_), object(std::move(object_)), index(std::move(index_)) {}
};

struct SliceExpression : Expression {
  ExpressionPointer object;
  ExpressionPointer start;  // each may be null
  ExpressionPointer stop;
  ExpressionPointer step;
  explicit SliceExpression(int line_) : Expression(ExpressionKind::kSlice, line_) {}
};

struct CallExpression : Expression {
  ExpressionPointer callee;
  ArgumentExpressions arguments;
  explicit CallExpression(int line_) : Expression(ExpressionKind::kCall, line_) {}
};

struct FilterExpression : Expression {
  ExpressionPointer operand;  // null inside `{% filter %}` blocks
  std::string name;
  FilterFunction function = nullptr;
  ArgumentExpressions arguments;
  explicit FilterExpression(int line_) : Expression(ExpressionKind::kFilter, line_) {}
};

struct TestExpression : Expression {
  ExpressionPointer operand;
  std::string name;
  TestFunction function = nullptr;
  ArgumentExpressions arguments;
  bool negated = false;
  explicit TestExpression(int line_) : Expression(ExpressionKind::kTest, line_) {}
};

enum class StatementKind { kText, kOutput, kIf, kFor, kSet, kBlockSet, kMacro, kCallBlock, kFilterBlock, kWith,
                           kBreak, kContinue, kGeneration };

struct Statement {
  StatementKind kind;
  int line;
  Statement(StatementKind kind_, int line_) : kind(kind_), line(line_) {}
  virtual ~Statement() = default;
};

struct TextStatement : Statement {
  std::string text;
  TextStatement(std::string text_, int line_) : Statement(StatementKind::kText, line_), text(std::move(text_)) {}
};

struct OutputStatement : Statement {
  ExpressionPointer value;
  OutputStatement(ExpressionPointer value_, int line_)
      : Statement(StatementKind::kOutput, line_), value(std::move(value_)) {}
};

struct IfStatement : Statement {
  std::vector<std::pair<ExpressionPointer, StatementList>> branches;  // if and elifs
  StatementList else_body;
  explicit IfStatement(int line_) : Statement(StatementKind::kIf, line_) {}
};

// Where `set`, `for` and `with` store values: one name, several names (unpacking), or a
// namespace attribute (`ns.attribute`).
struct AssignTarget {
  std::vector<std::string> names;
  std::string namespace_attribute;  // non-empty: names[0] is the namespace
  bool unpack = false;
};

struct ForStatement : Statement {
  AssignTarget target;
  ExpressionPointer iterable;
  ExpressionPointer filter;  // `for x in y if filter`
  StatementList body;
  StatementList else_body;
  explicit ForStatement(int line_) : Statement(StatementKind::kFor, line_) {}
};

struct SetStatement : Statement {
  AssignTarget target;
  ExpressionPointer value;
  explicit SetStatement(int line_) : Statement(StatementKind::kSet, line_) {}
};

struct BlockSetStatement : Statement {
  AssignTarget target;
  StatementList body;
  std::vector<std::unique_ptr<FilterExpression>> filters;  // `{% set x | upper %}`
  explicit BlockSetStatement(int line_) : Statement(StatementKind::kBlockSet, line_) {}
};

struct MacroParameter {
  std::string name;
  ExpressionPointer default_value;  // may be null
};

struct MacroStatement : Statement {
  std::string name;
  std::vector<MacroParameter> parameters;
  StatementList body;
  explicit MacroStatement(int line_) : Statement(StatementKind::kMacro, line_) {}
};

// `{% call(params) macro(args) %}body{% endcall %}`: the body becomes `caller`.
struct CallBlockStatement : Statement {
  std::unique_ptr<CallExpression> call;
  std::vector<MacroParameter> caller_parameters;
  StatementList body;
  explicit CallBlockStatement(int line_) : Statement(StatementKind::kCallBlock, line_) {}
};

struct FilterBlockStatement : Statement {
  std::vector<std::unique_ptr<FilterExpression>> filters;
  StatementList body;
  explicit FilterBlockStatement(int line_) : Statement(StatementKind::kFilterBlock, line_) {}
};

struct WithStatement : Statement {
  std::vector<std::pair<std::string, ExpressionPointer>> assignments;
  StatementList body;
  explicit WithStatement(int line_) : Statement(StatementKind::kWith, line_) {}
};

// `{% generation %}...{% endgeneration %}`: renders its body and records where it landed.
struct GenerationStatement : Statement {
  StatementList body;
  explicit GenerationStatement(int line_) : Statement(StatementKind::kGeneration, line_) {}
};

struct SimpleStatement : Statement {
  SimpleStatement(StatementKind kind_, int line_) : Statement(kind_, line_) {}
};

}  // namespace surogate::chat_template
