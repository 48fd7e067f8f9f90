// Reading the arguments of a filter, test, method or global function the way Python binds them:
// by position or by keyword, with defaults, and with a clear error for a wrong type or an
// argument the function does not take.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "chat_template/ast.h"
#include "chat_template/evaluator.h"

namespace surogate::chat_template {

class ArgumentReader {
public:
  // `parameters` are the names in positional order, e.g. {"old", "new", "count"}.
  ArgumentReader(Evaluator& evaluator, CallArguments& arguments, std::string_view function_name,
                 std::vector<std::string_view> parameters, int line)
      : evaluator_(evaluator), arguments_(arguments), function_name_(function_name),
        parameters_(std::move(parameters)), line_(line) {
    if (arguments_.positional.size() > parameters_.size())
      evaluator_.fail(line_, fmt::format("{}() takes at most {} argument(s) ({} given)", function_name_,
                                         parameters_.size(), arguments_.positional.size()));
    for (const auto& [name, value] : arguments_.keyword) {
      bool known = false;
      for (auto parameter : parameters_) known = known || parameter == name;
      if (!known)
        evaluator_.fail(line_, fmt::format("{}() got an unexpected keyword argument '{}'", function_name_, name));
    }
  }

  // The argument at `index` (or given by its name), if any.
  const Value* find(size_t index) const {
    if (index < arguments_.positional.size()) return &arguments_.positional[index];
    for (const auto& [name, value] : arguments_.keyword)
      if (name == parameters_[index]) return &value;
    return nullptr;
  }

  Value get(size_t index, Value default_value = Value::none()) const {
    const Value* value = find(index);
    return value ? *value : default_value;
  }

  const Value& require(size_t index) const {
    const Value* value = find(index);
    if (!value)
      evaluator_.fail(line_, fmt::format("{}() is missing the argument '{}'", function_name_, parameters_[index]));
    return *value;
  }

  std::string string(size_t index, std::string default_value = {}) const {
    const Value* value = find(index);
    if (!value) return default_value;
    if (!value->is_string()) type_error(index, "a string", *value);
    return value->as_string();
  }

  std::optional<std::string> optional_string(size_t index) const {
    const Value* value = find(index);
    if (!value || value->is_none()) return std::nullopt;
    if (!value->is_string()) type_error(index, "a string", *value);
    return value->as_string();
  }

  int64_t integer(size_t index, int64_t default_value) const {
    const Value* value = find(index);
    if (!value || value->is_none()) return default_value;
    if (value->kind() == Value::Kind::kInt) return value->as_int();
    if (value->kind() == Value::Kind::kBool) return value->as_bool();
    type_error(index, "an integer", *value);
  }

  bool boolean(size_t index, bool default_value) const {
    const Value* value = find(index);
    return value ? value->truthy() : default_value;
  }

  [[noreturn]] void type_error(size_t index, std::string_view expected, const Value& got) const {
    evaluator_.fail(line_, fmt::format("{}(): the argument '{}' must be {}, not {}", function_name_,
                                       parameters_[index], expected, got.type_name()));
  }

private:
  Evaluator& evaluator_;
  CallArguments& arguments_;
  std::string_view function_name_;
  std::vector<std::string_view> parameters_;
  int line_;
};

}  // namespace surogate::chat_template
