// Renders parsed statements (ast.h) against template variables, with jinja2's semantics as
// Hugging Face configures them: default Undefined (prints as nothing, is falsy, iterates as
// empty, but fails on attribute access, arithmetic and calls), a fresh scope per loop iteration
// (hence `namespace()`), immutable lists and dicts, and loop controls. Filters (filters.cpp),
// tests (tests.cpp) and methods of str/dict/list (methods.cpp) call back into the helpers here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat_template/ast.h"
#include "chat_template/chat_template.h"
#include "chat_template/stack_guard.h"
#include "chat_template/value.h"

namespace surogate::chat_template {

// Whether `object` (a str, dict, list or loop) has a method called `name` (methods.cpp).
bool has_method(const Value& object, std::string_view name);

class Evaluator {
public:
  Evaluator(const std::string& source_name, std::vector<std::pair<std::string, Value>> variables);

  // Renders `body` and returns the text; generation spans are collected in `spans`.
  std::string render(const StatementList& body, std::vector<TextSpan>* spans);

  [[noreturn]] void fail(int line, const std::string& message) const;
  // Fails with the undefined value's own message ("'foo' is undefined").
  [[noreturn]] void fail_undefined(int line, const Value& undefined) const;

  Value evaluate(const Expression& expression);
  Value call(const Value& callee, CallArguments& arguments, int line);
  Value get_attribute(const Value& object, const std::string& name, int line);
  Value get_item(const Value& object, const Value& key, int line);
  // The items a for loop or filter walks: list items, string characters, dict keys.
  std::vector<Value> iterate(const Value& value, int line);
  // Calls a method of a str, dict, list or loop value; false when there is no such method.
  bool call_method(const Value& object, const std::string& name, CallArguments& arguments, int line, Value& result);
  bool apply_test_by_name(const std::string& name, const Value& value, CallArguments& arguments, int line);
  Value apply_filter_by_name(const std::string& name, const Value& value, CallArguments& arguments, int line);
  const std::string& source_name() const { return source_name_; }
  // Fail (naming the line) when a string of `bytes` or a list of `items` would pass the bounds of
  // render_limits.h; called before building one, where the size is known up front.
  void check_text_size(uint64_t bytes, int line) const;
  void check_list_size(uint64_t items, int line) const;

private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Frame = std::vector<std::pair<std::string, Value>>;

  Flow execute(const StatementList& body);
  Flow execute_statement(const Statement& statement);
  Flow execute_for(const struct ForStatement& statement);
  void execute_call_block(const struct CallBlockStatement& statement);
  void assign(const AssignTarget& target, const Value& value, int line);
  void set_variable(const std::string& name, Value value);
  Value lookup(const std::string& name, int line);
  // One statement or expression more: fails once a render passes kMaxRenderSteps.
  void count_step(int line);
  Value evaluate_node(const Expression& expression);
  Value evaluate_binary(const BinaryExpression& expression);
  Value evaluate_call(const CallExpression& expression);
  Value evaluate_slice(const SliceExpression& expression);
  Value apply_filter(const FilterExpression& filter, const Value& input);
  CallArguments evaluate_arguments(const ArgumentExpressions& arguments);
  Value make_macro(const MacroStatement& macro);
  Value invoke_macro(const std::string& name, const std::vector<MacroParameter>& parameters, const StatementList& body,
                     CallArguments& arguments, int line);
  Value global_function(const std::string& name, int line);
  std::string capture(const StatementList& body);

  const std::string& source_name_;
  std::vector<Frame> frames_;
  std::string* output_ = nullptr;
  std::string* top_output_ = nullptr;
  std::vector<TextSpan>* spans_ = nullptr;
  int call_depth_ = 0;  // nested macro / caller() calls, bounded by kMaxCallDepth
  uint64_t steps_ = 0;  // statements + expressions so far, bounded by kMaxRenderSteps
  detail::StackGuard stack_;  // bounds the recursion of evaluate / execute_statement
};

}  // namespace surogate::chat_template
