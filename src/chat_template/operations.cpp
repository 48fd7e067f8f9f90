// Python operators and lookups for the evaluator: arithmetic, comparison, `in`, attribute and
// item access (jinja2's getattr/getitem order: a dict's methods shadow its keys for `.name`, keys
// come first for `["name"]`), the `loop` object, and the global functions Hugging Face provides
// (range, namespace, dict, raise_exception, strftime_now).
#include <chrono>
#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "chat_template/arguments.h"
#include "chat_template/evaluator.h"
#include "chat_template/integer_math.h"
#include "chat_template/parser.h"
#include "chat_template/python_strings.h"

namespace surogate::chat_template {
namespace {

bool is_integer_like(const Value& value) {
  return value.kind() == Value::Kind::kInt || value.kind() == Value::Kind::kBool;
}

int64_t integer_of(const Value& value) {
  return value.kind() == Value::Kind::kBool ? int64_t{value.as_bool()} : value.as_int();
}

const char* operator_symbol(BinaryOperator op) {
  switch (op) {
    case BinaryOperator::kAdd: return "+";
    case BinaryOperator::kSubtract: return "-";
    case BinaryOperator::kMultiply: return "*";
    case BinaryOperator::kDivide: return "/";
    case BinaryOperator::kFloorDivide: return "//";
    case BinaryOperator::kModulo: return "%";
    case BinaryOperator::kPower: return "**";
    case BinaryOperator::kLess: return "<";
    case BinaryOperator::kLessEqual: return "<=";
    case BinaryOperator::kGreater: return ">";
    case BinaryOperator::kGreaterEqual: return ">=";
    default: return "?";
  }
}

// `sequence * count`, bounded before anything is built (`'x' * 10**12` must fail, not allocate).
Value repeat_sequence(const Evaluator& evaluator, const Value& sequence, int64_t count, int line) {
  const uint64_t times = static_cast<uint64_t>(std::max<int64_t>(count, 0));
  const uint64_t length = sequence.is_string() ? sequence.as_string().size() : sequence.as_list().items.size();
  const uint64_t total = length == 0 ? 0 : (times > UINT64_MAX / length ? UINT64_MAX : times * length);
  if (sequence.is_string())
    evaluator.check_text_size(total, line);
  else
    evaluator.check_list_size(total, line);
  if (sequence.is_string()) {
    std::string out;
    for (int64_t i = 0; i < count; ++i) out += sequence.as_string();
    return Value(std::move(out));
  }
  std::vector<Value> items;
  for (int64_t i = 0; i < count; ++i)
    items.insert(items.end(), sequence.as_list().items.begin(), sequence.as_list().items.end());
  return Value::list(std::move(items), sequence.as_list().is_tuple);
}

}  // namespace

Value Evaluator::evaluate_binary(const BinaryExpression& expression) {
  const int line = expression.line;
  const BinaryOperator op = expression.op;
  if (op == BinaryOperator::kAnd) {
    Value left = evaluate(*expression.left);
    return left.truthy() ? evaluate(*expression.right) : left;
  }
  if (op == BinaryOperator::kOr) {
    Value left = evaluate(*expression.left);
    return left.truthy() ? left : evaluate(*expression.right);
  }
  Value left = evaluate(*expression.left);
  Value right = evaluate(*expression.right);
  switch (op) {
    case BinaryOperator::kConcat:
      return Value(left.str() + right.str());
    case BinaryOperator::kEqual:
      return Value(values_equal(left, right));
    case BinaryOperator::kNotEqual:
      return Value(!values_equal(left, right));
    case BinaryOperator::kIn:
    case BinaryOperator::kNotIn: {
      bool found = false;
      if (right.is_string()) {
        if (left.is_undefined()) fail_undefined(line, left);
        if (!left.is_string())
          fail(line, fmt::format("'in <string>' requires string as left operand, not {}", left.type_name()));
        found = right.as_string().find(left.as_string()) != std::string::npos;
      } else if (right.is_list()) {
        for (const auto& item : right.as_list().items) found = found || values_equal(left, item);
      } else if (right.is_dict()) {
        found = left.is_string() && right.as_dict().find(left.as_string()) != nullptr;
      } else if (right.kind() == Value::Kind::kNamespace) {
        found = left.is_string() && right.namespace_attributes().find(left.as_string()) != nullptr;
      } else if (!right.is_undefined()) {
        fail(line, fmt::format("argument of type '{}' is not iterable", right.type_name()));
      }
      return Value(op == BinaryOperator::kIn ? found : !found);
    }
    default:
      break;
  }
  if (left.is_undefined()) fail_undefined(line, left);
  if (right.is_undefined()) fail_undefined(line, right);
  auto type_error = [&]() {
    fail(line, fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", operator_symbol(op), left.type_name(),
                           right.type_name()));
  };
  if (op == BinaryOperator::kLess || op == BinaryOperator::kLessEqual || op == BinaryOperator::kGreater ||
      op == BinaryOperator::kGreaterEqual) {
    bool swap = op == BinaryOperator::kGreater || op == BinaryOperator::kLessEqual;
    std::optional<bool> less = swap ? value_less(right, left) : value_less(left, right);
    if (!less)
      fail(line, fmt::format("'{}' not supported between instances of '{}' and '{}'", operator_symbol(op),
                             left.type_name(), right.type_name()));
    bool result = (op == BinaryOperator::kLess || op == BinaryOperator::kGreater) ? *less : !*less;
    return Value(result);
  }
  if (left.is_number() && right.is_number()) {
    bool integers = is_integer_like(left) && is_integer_like(right);
    // An int64 result or a failure naming the line (Python's ints would not overflow).
    auto exact = [&](std::optional<int64_t> result) {
      if (!result)
        fail(line, fmt::format("integer overflow: {} {} {} does not fit in 64 bits", left.repr(), operator_symbol(op),
                               right.repr()));
      return Value(*result);
    };
    switch (op) {
      case BinaryOperator::kAdd:
        return integers ? exact(integer_math::add(integer_of(left), integer_of(right)))
                        : Value(left.to_double() + right.to_double());
      case BinaryOperator::kSubtract:
        return integers ? exact(integer_math::subtract(integer_of(left), integer_of(right)))
                        : Value(left.to_double() - right.to_double());
      case BinaryOperator::kMultiply:
        return integers ? exact(integer_math::multiply(integer_of(left), integer_of(right)))
                        : Value(left.to_double() * right.to_double());
      case BinaryOperator::kDivide:
        if (right.to_double() == 0.0) fail(line, "division by zero");
        return Value(left.to_double() / right.to_double());
      case BinaryOperator::kFloorDivide:
      case BinaryOperator::kModulo: {
        if (right.to_double() == 0.0) fail(line, "integer division or modulo by zero");
        if (integers) {
          int64_t a = integer_of(left);
          int64_t b = integer_of(right);
          return op == BinaryOperator::kFloorDivide ? exact(integer_math::floor_divide(a, b))
                                                    : Value(integer_math::modulo(a, b));
        }
        // CPython's float floor division and modulo.
        double a = left.to_double();
        double b = right.to_double();
        double remainder = std::fmod(a, b);
        double quotient = (a - remainder) / b;
        if (remainder != 0.0 && ((b < 0) != (remainder < 0))) {
          remainder += b;
          quotient -= 1.0;
        }
        if (op == BinaryOperator::kModulo) return Value(remainder);
        double floored = std::floor(quotient);
        if (quotient - floored > 0.5) floored += 1.0;
        return Value(floored);
      }
      case BinaryOperator::kPower:
        if (integers && integer_of(right) >= 0) return exact(integer_math::power(integer_of(left), integer_of(right)));
        return Value(std::pow(left.to_double(), right.to_double()));
      default:
        type_error();
    }
  }
  if (op == BinaryOperator::kAdd) {
    if (left.is_string() && right.is_string()) return Value(left.as_string() + right.as_string());
    if (left.is_list() && right.is_list() && left.as_list().is_tuple == right.as_list().is_tuple) {
      std::vector<Value> items = left.as_list().items;
      items.insert(items.end(), right.as_list().items.begin(), right.as_list().items.end());
      return Value::list(std::move(items), left.as_list().is_tuple);
    }
  }
  if (op == BinaryOperator::kMultiply) {
    if ((left.is_string() || left.is_list()) && is_integer_like(right)) return repeat_sequence(*this, left, integer_of(right), line);
    if ((right.is_string() || right.is_list()) && is_integer_like(left)) return repeat_sequence(*this, right, integer_of(left), line);
  }
  if (op == BinaryOperator::kModulo && left.is_string())
    fail(line, "printf-style string formatting with '%' is not supported; use the 'format' filter or '~'");
  fail(line, fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", operator_symbol(op), left.type_name(),
                         right.type_name()));
}

Value Evaluator::get_attribute(const Value& object, const std::string& name, int line) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      fail_undefined(line, object);
    case Value::Kind::kDict: {
      if (has_method(object, name)) break;
      if (const Value* value = object.as_dict().find(name)) return *value;
      return Value::undefined(fmt::format("'dict object' has no attribute '{}'", name));
    }
    case Value::Kind::kNamespace:
      if (const Value* value = object.namespace_attributes().find(name)) return *value;
      return Value::undefined(fmt::format("'Namespace object' has no attribute '{}'", name));
    case Value::Kind::kLoop: {
      const LoopStorage& loop = object.as_loop();
      const int64_t length = static_cast<int64_t>(loop.items->size());
      const int64_t index0 = static_cast<int64_t>(loop.index0);
      if (name == "index") return Value(index0 + 1);
      if (name == "index0") return Value(index0);
      if (name == "revindex") return Value(length - index0);
      if (name == "revindex0") return Value(length - index0 - 1);
      if (name == "first") return Value(index0 == 0);
      if (name == "last") return Value(index0 == length - 1);
      if (name == "length") return Value(length);
      if (name == "depth") return Value(loop.depth0 + 1);
      if (name == "depth0") return Value(loop.depth0);
      if (name == "previtem")
        return index0 > 0 ? (*loop.items)[loop.index0 - 1] : Value::undefined("there is no previous item");
      if (name == "nextitem")
        return index0 + 1 < length ? (*loop.items)[loop.index0 + 1] : Value::undefined("there is no next item");
      if (name == "cycle") break;
      return Value::undefined(fmt::format("'LoopContext object' has no attribute '{}'", name));
    }
    default:
      break;
  }
  if (has_method(object, name)) {
    Value bound = object;
    std::string method = name;
    return Value::callable(name, [bound, method](Evaluator& evaluator, CallArguments& arguments, int call_line) {
      Value result;
      evaluator.call_method(bound, method, arguments, call_line, result);
      return result;
    });
  }
  return Value::undefined(fmt::format("'{}' object has no attribute '{}'", object.type_name(), name));
}

Value Evaluator::get_item(const Value& object, const Value& key, int line) {
  if (object.is_undefined()) fail_undefined(line, object);
  if (object.is_dict()) {
    if (key.is_string()) {
      if (const Value* value = object.as_dict().find(key.as_string())) return *value;
      return get_attribute(object, key.as_string(), line);
    }
    return Value::undefined(fmt::format("'dict object' has no attribute {}", key.repr()));
  }
  if ((object.is_list() || object.is_string()) && is_integer_like(key)) {
    int64_t index = integer_of(key);
    if (object.is_list()) {
      const auto& items = object.as_list().items;
      int64_t size = static_cast<int64_t>(items.size());
      if (index < 0) index += size;
      if (index < 0 || index >= size)
        return Value::undefined(fmt::format("'{} object' has no element {}", object.type_name(), integer_of(key)));
      return items[static_cast<size_t>(index)];
    }
    std::u32string points = utf8_decode(object.as_string());
    int64_t size = static_cast<int64_t>(points.size());
    if (index < 0) index += size;
    if (index < 0 || index >= size)
      return Value::undefined(fmt::format("'str object' has no element {}", integer_of(key)));
    return Value(utf8_encode(std::u32string(1, points[static_cast<size_t>(index)])));
  }
  if (key.is_string()) return get_attribute(object, key.as_string(), line);
  return Value::undefined(fmt::format("'{}' object has no element {}", object.type_name(), key.repr()));
}

Value Evaluator::global_function(const std::string& name, int line) {
  if (name == "range") {
    return Value::callable(name, [](Evaluator& evaluator, CallArguments& arguments, int call_line) {
      if (!arguments.keyword.empty()) evaluator.fail(call_line, "range() takes no keyword arguments");
      std::vector<int64_t> bounds;
      for (const auto& argument : arguments.positional) {
        if (!is_integer_like(argument))
          evaluator.fail(call_line, fmt::format("range() needs integers, not {}", argument.type_name()));
        bounds.push_back(integer_of(argument));
      }
      if (bounds.empty() || bounds.size() > 3)
        evaluator.fail(call_line, fmt::format("range() takes 1 to 3 arguments ({} given)", bounds.size()));
      int64_t start = bounds.size() == 1 ? 0 : bounds[0];
      int64_t stop = bounds.size() == 1 ? bounds[0] : bounds[1];
      int64_t step = bounds.size() == 3 ? bounds[2] : 1;
      if (step == 0) evaluator.fail(call_line, "range() arg 3 must not be zero");
      std::vector<Value> items;
      for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
        if (items.size() >= 1'000'000) evaluator.fail(call_line, "range() is limited to 1,000,000 items");
        items.emplace_back(i);
        auto next = integer_math::add(i, step);
        if (!next) break;  // the next item would pass 64 bits, so it lies beyond stop too
        i = *next;
      }
      return Value::list(std::move(items));
    });
  }
  if (name == "namespace" || name == "dict") {
    bool is_namespace = name == "namespace";
    return Value::callable(name, [is_namespace](Evaluator& evaluator, CallArguments& arguments, int call_line) {
      DictStorage storage;
      for (const auto& argument : arguments.positional) {
        if (!argument.is_dict())
          evaluator.fail(call_line, fmt::format("{}() takes a dict or keyword arguments, not {}",
                                                is_namespace ? "namespace" : "dict", argument.type_name()));
        for (const auto& [key, value] : argument.as_dict().entries) storage.set(key, value);
      }
      for (const auto& [key, value] : arguments.keyword) {
        if (is_namespace && key.starts_with('_'))
          evaluator.fail(call_line, fmt::format("namespace attributes cannot start with '_' (got '{}')", key));
        storage.set(key, value);
      }
      return is_namespace ? Value::make_namespace(std::move(storage)) : Value::dict(std::move(storage));
    });
  }
  if (name == "raise_exception") {
    return Value::callable(name, [](Evaluator& evaluator, CallArguments& arguments, int call_line) -> Value {
      std::string message = arguments.positional.empty() ? std::string() : arguments.positional[0].str();
      evaluator.fail(call_line, "the template raised an error: " + message);
    });
  }
  if (name == "strftime_now") {
    return Value::callable(name, [](Evaluator& evaluator, CallArguments& arguments, int call_line) {
      ArgumentReader reader(evaluator, arguments, "strftime_now", {"format"}, call_line);
      std::string format = reader.string(0);
      std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
      std::tm local{};
      localtime_r(&now, &local);
      char buffer[512];
      size_t length = std::strftime(buffer, sizeof(buffer), format.c_str(), &local);
      return Value(std::string(buffer, length));
    });
  }
  (void)line;
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

bool Evaluator::apply_test_by_name(const std::string& name, const Value& value, CallArguments& arguments, int line) {
  TestFunction test = find_test(name);
  if (!test) fail(line, fmt::format("unknown test '{}'", name));
  return test(*this, value, arguments, line);
}

Value Evaluator::apply_filter_by_name(const std::string& name, const Value& value, CallArguments& arguments, int line) {
  FilterFunction filter = find_filter(name);
  if (!filter) fail(line, fmt::format("unknown filter '{}'", name));
  return filter(*this, value, arguments, line);
}

}  // namespace surogate::chat_template
