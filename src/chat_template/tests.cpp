// Jinja tests (`x is defined`, `x is string`, `n is divisibleby 3`, ...) with jinja2's meaning:
// a bool is a number but not an integer, strings are iterable sequences, dicts are mappings.
#include <array>
#include <map>

#include <fmt/format.h>

#include "chat_template/arguments.h"
#include "chat_template/evaluator.h"
#include "chat_template/parser.h"
#include "chat_template/python_strings.h"

namespace surogate::chat_template {
namespace {

using Kind = Value::Kind;

const Value& only_argument(Evaluator& evaluator, CallArguments& arguments, const char* name, int line) {
  if (arguments.positional.size() != 1 || !arguments.keyword.empty())
    evaluator.fail(line, fmt::format("the test '{}' takes one argument", name));
  return arguments.positional[0];
}

void no_arguments(Evaluator& evaluator, CallArguments& arguments, const char* name, int line) {
  if (!arguments.positional.empty() || !arguments.keyword.empty())
    evaluator.fail(line, fmt::format("the test '{}' takes no arguments", name));
}

// str.islower() / str.isupper(): has cased characters and all of them are in that case.
bool python_lower_equals(const std::string& text) { return python_lower(text) == text && python_upper(text) != text; }
bool python_upper_equals(const std::string& text) { return python_upper(text) == text && python_lower(text) != text; }

#define SIMPLE_TEST(function_name, test_name, expression)                                          \
  bool function_name(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) { \
    no_arguments(evaluator, arguments, test_name, line);                                           \
    return (expression);                                                                           \
  }

SIMPLE_TEST(test_defined, "defined", !value.is_undefined())
SIMPLE_TEST(test_undefined, "undefined", value.is_undefined())
SIMPLE_TEST(test_none, "none", value.is_none())
SIMPLE_TEST(test_string, "string", value.is_string())
SIMPLE_TEST(test_mapping, "mapping", value.is_dict())
SIMPLE_TEST(test_iterable, "iterable",
            value.is_string() || value.is_list() || value.is_dict() || value.is_undefined())
SIMPLE_TEST(test_sequence, "sequence", value.is_string() || value.is_list() || value.is_dict())
SIMPLE_TEST(test_number, "number", value.is_number())
SIMPLE_TEST(test_integer, "integer", value.kind() == Kind::kInt)
SIMPLE_TEST(test_float, "float", value.kind() == Kind::kFloat)
SIMPLE_TEST(test_boolean, "boolean", value.kind() == Kind::kBool)
SIMPLE_TEST(test_true, "true", value.kind() == Kind::kBool && value.as_bool())
SIMPLE_TEST(test_false, "false", value.kind() == Kind::kBool && !value.as_bool())
SIMPLE_TEST(test_callable, "callable", value.kind() == Kind::kCallable)
SIMPLE_TEST(test_lower, "lower", value.is_string() && python_lower_equals(value.as_string()))
SIMPLE_TEST(test_upper, "upper", value.is_string() && python_upper_equals(value.as_string()))

bool integer_test(Evaluator& evaluator, const Value& value, const char* name, int line, int64_t& out) {
  if (value.kind() == Kind::kInt) {
    out = value.as_int();
    return true;
  }
  if (value.kind() == Kind::kBool) {
    out = value.as_bool();
    return true;
  }
  if (value.is_undefined()) evaluator.fail_undefined(line, value);
  evaluator.fail(line, fmt::format("the test '{}' needs an integer, not {}", name, value.type_name()));
}

bool test_odd(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  no_arguments(evaluator, arguments, "odd", line);
  int64_t number = 0;
  integer_test(evaluator, value, "odd", line, number);
  return number % 2 != 0;
}

bool test_even(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  no_arguments(evaluator, arguments, "even", line);
  int64_t number = 0;
  integer_test(evaluator, value, "even", line, number);
  return number % 2 == 0;
}

bool test_divisibleby(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  const Value& divisor = only_argument(evaluator, arguments, "divisibleby", line);
  int64_t number = 0;
  int64_t by = 0;
  integer_test(evaluator, value, "divisibleby", line, number);
  integer_test(evaluator, divisor, "divisibleby", line, by);
  if (by == 0) evaluator.fail(line, "divisibleby 0");
  return number % by == 0;
}

bool test_equal(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  return values_equal(value, only_argument(evaluator, arguments, "eq", line));
}
bool test_not_equal(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  return !values_equal(value, only_argument(evaluator, arguments, "ne", line));
}

bool ordered(Evaluator& evaluator, const Value& left, const Value& right, const char* name, int line) {
  if (left.is_undefined()) evaluator.fail_undefined(line, left);
  if (right.is_undefined()) evaluator.fail_undefined(line, right);
  auto less = value_less(left, right);
  if (!less)
    evaluator.fail(line, fmt::format("'{}' not supported between instances of '{}' and '{}'", name, left.type_name(),
                                     right.type_name()));
  return *less;
}
bool test_less(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  return ordered(evaluator, value, only_argument(evaluator, arguments, "lt", line), "<", line);
}
bool test_greater(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  return ordered(evaluator, only_argument(evaluator, arguments, "gt", line), value, ">", line);
}
bool test_less_equal(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  return !ordered(evaluator, only_argument(evaluator, arguments, "le", line), value, "<=", line);
}
bool test_greater_equal(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  return !ordered(evaluator, value, only_argument(evaluator, arguments, "ge", line), ">=", line);
}

bool test_in(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  const Value& container = only_argument(evaluator, arguments, "in", line);
  if (container.is_string()) return value.is_string() && container.as_string().find(value.as_string()) != std::string::npos;
  if (container.is_dict()) return value.is_string() && container.as_dict().find(value.as_string()) != nullptr;
  for (const auto& item : evaluator.iterate(container, line))
    if (values_equal(item, value)) return true;
  return false;
}

bool test_sameas(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  const Value& other = only_argument(evaluator, arguments, "sameas", line);
  if (value.kind() != other.kind()) return false;
  switch (value.kind()) {
    case Kind::kNone:
    case Kind::kUndefined:
      return true;
    case Kind::kBool:
      return value.as_bool() == other.as_bool();
    case Kind::kList:
      return &value.as_list() == &other.as_list();
    case Kind::kDict:
      return &value.as_dict() == &other.as_dict();
    default:
      return values_equal(value, other);
  }
}

const std::map<std::string, TestFunction, std::less<>>& test_registry() {
  static const std::map<std::string, TestFunction, std::less<>> registry = {
      {"defined", test_defined},   {"undefined", test_undefined}, {"none", test_none},
      {"string", test_string},     {"mapping", test_mapping},     {"iterable", test_iterable},
      {"sequence", test_sequence}, {"number", test_number},       {"integer", test_integer},
      {"float", test_float},       {"boolean", test_boolean},     {"true", test_true},
      {"false", test_false},       {"callable", test_callable},   {"lower", test_lower},
      {"upper", test_upper},       {"odd", test_odd},             {"even", test_even},
      {"divisibleby", test_divisibleby}, {"eq", test_equal},      {"equalto", test_equal},
      {"==", test_equal},          {"ne", test_not_equal},        {"!=", test_not_equal},
      {"lt", test_less},           {"lessthan", test_less},       {"<", test_less},
      {"gt", test_greater},        {"greaterthan", test_greater}, {">", test_greater},
      {"le", test_less_equal},     {"<=", test_less_equal},       {"ge", test_greater_equal},
      {">=", test_greater_equal},  {"in", test_in},               {"sameas", test_sameas},
  };
  return registry;
}

}  // namespace

TestFunction find_test(std::string_view name) {
  const auto& registry = test_registry();
  auto found = registry.find(name);
  return found == registry.end() ? nullptr : found->second;
}

std::vector<std::string> test_names() {
  std::vector<std::string> names;
  for (const auto& entry : test_registry()) names.push_back(entry.first);
  return names;
}

}  // namespace surogate::chat_template
