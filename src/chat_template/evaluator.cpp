// Tree-walking renderer (see evaluator.h). Statements append to one output string; scopes are a
// stack of small frames (per loop iteration, macro call and `with` block), looked up innermost
// first. Errors name the template source and the line of the expression that failed.
#include "chat_template/evaluator.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "chat_template/integer_math.h"
#include "chat_template/parser.h"
#include "chat_template/python_strings.h"
#include "chat_template/render_limits.h"
#include "chat_template/template_error.h"

namespace surogate::chat_template {

Evaluator::Evaluator(const std::string& source_name, std::vector<std::pair<std::string, Value>> variables)
    : source_name_(source_name) {
  frames_.push_back(std::move(variables));
}

std::string Evaluator::render(const StatementList& body, std::vector<TextSpan>* spans) {
  std::string out;
  output_ = &out;
  top_output_ = &out;
  spans_ = spans;
  execute(body);
  output_ = nullptr;
  top_output_ = nullptr;
  return out;
}

void Evaluator::fail(int line, const std::string& message) const { fail_template(source_name_, line, message); }

void Evaluator::fail_undefined(int line, const Value& undefined) const { fail(line, undefined.undefined_hint()); }

void Evaluator::count_step(int line) {
  if (++steps_ > detail::kMaxRenderSteps)
    fail(line, fmt::format("the render takes more than {} steps (statements and expressions): does a loop or "
                           "macro of the template run without end? Fix the template",
                           detail::kMaxRenderSteps));
}

void Evaluator::check_text_size(uint64_t bytes, int line) const {
  if (bytes > detail::kMaxTextBytes)
    fail(line, fmt::format("the template builds a string of {} bytes, more than the limit of {} MiB: fix the "
                           "template",
                           bytes, detail::kMaxTextBytes >> 20));
}

void Evaluator::check_list_size(uint64_t items, int line) const {
  if (items > detail::kMaxListItems)
    fail(line, fmt::format("the template builds a list of {} items, more than the limit of {}: fix the template",
                           items, detail::kMaxListItems));
}

// ---- statements ----

Evaluator::Flow Evaluator::execute(const StatementList& body) {
  for (const auto& statement : body) {
    Flow flow = execute_statement(*statement);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::execute_statement(const Statement& statement) {
  if (stack_.exhausted()) fail(statement.line, "the template nests blocks or calls too deeply");
  count_step(statement.line);
  // One statement appends at most one value of bounded size, so checking before each keeps the
  // text (rendered or captured by a block set / filter block / caller) within twice the bound.
  check_text_size(output_->size(), statement.line);
  switch (statement.kind) {
    case StatementKind::kText:
      output_->append(static_cast<const TextStatement&>(statement).text);
      return Flow::kNormal;
    case StatementKind::kOutput: {
      Value value = evaluate(*static_cast<const OutputStatement&>(statement).value);
      if (value.is_string())
        output_->append(value.as_string());
      else
        output_->append(value.str());
      return Flow::kNormal;
    }
    case StatementKind::kIf: {
      const auto& node = static_cast<const IfStatement&>(statement);
      for (const auto& [condition, body] : node.branches)
        if (evaluate(*condition).truthy()) return execute(body);
      return execute(node.else_body);
    }
    case StatementKind::kFor:
      execute_for(static_cast<const ForStatement&>(statement));
      return Flow::kNormal;
    case StatementKind::kSet: {
      const auto& node = static_cast<const SetStatement&>(statement);
      assign(node.target, evaluate(*node.value), node.line);
      return Flow::kNormal;
    }
    case StatementKind::kBlockSet: {
      const auto& node = static_cast<const BlockSetStatement&>(statement);
      Value value(capture(node.body));
      for (const auto& filter : node.filters) value = apply_filter(*filter, value);
      assign(node.target, value, node.line);
      return Flow::kNormal;
    }
    case StatementKind::kMacro: {
      const auto& node = static_cast<const MacroStatement&>(statement);
      set_variable(node.name, make_macro(node));
      return Flow::kNormal;
    }
    case StatementKind::kCallBlock:
      execute_call_block(static_cast<const CallBlockStatement&>(statement));
      return Flow::kNormal;
    case StatementKind::kFilterBlock: {
      const auto& node = static_cast<const FilterBlockStatement&>(statement);
      Value value(capture(node.body));
      for (const auto& filter : node.filters) value = apply_filter(*filter, value);
      output_->append(value.str());
      return Flow::kNormal;
    }
    case StatementKind::kWith: {
      const auto& node = static_cast<const WithStatement&>(statement);
      Frame frame;
      for (const auto& [name, expression] : node.assignments) frame.emplace_back(name, evaluate(*expression));
      frames_.push_back(std::move(frame));
      Flow flow = execute(node.body);
      frames_.pop_back();
      return flow;
    }
    case StatementKind::kBreak:
      return Flow::kBreak;
    case StatementKind::kContinue:
      return Flow::kContinue;
    case StatementKind::kGeneration: {
      const auto& node = static_cast<const GenerationStatement&>(statement);
      size_t begin = output_->size();
      Flow flow = execute(node.body);
      if (spans_ && output_ == top_output_) spans_->push_back(TextSpan{begin, output_->size()});
      return flow;
    }
  }
  return Flow::kNormal;
}

std::string Evaluator::capture(const StatementList& body) {
  std::string captured;
  std::string* saved = output_;
  output_ = &captured;
  execute(body);
  output_ = saved;
  return captured;
}

Evaluator::Flow Evaluator::execute_for(const ForStatement& statement) {
  Value iterable = evaluate(*statement.iterable);
  std::vector<Value> items = iterate(iterable, statement.line);
  if (statement.filter) {
    std::vector<Value> kept;
    for (auto& item : items) {
      frames_.emplace_back();
      assign(statement.target, item, statement.line);
      bool keep = evaluate(*statement.filter).truthy();
      frames_.pop_back();
      if (keep) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return execute(statement.else_body);
  auto loop = std::make_shared<LoopStorage>();
  loop->items = &items;
  Value loop_value = Value::loop(loop);
  for (size_t i = 0; i < items.size(); ++i) {
    loop->index0 = i;
    frames_.emplace_back();
    frames_.back().emplace_back("loop", loop_value);
    assign(statement.target, items[i], statement.line);
    Flow flow = execute(statement.body);
    frames_.pop_back();
    if (flow == Flow::kBreak) break;
  }
  loop->items = nullptr;
  return Flow::kNormal;
}

void Evaluator::set_variable(const std::string& name, Value value) {
  Frame& frame = frames_.back();
  for (auto& entry : frame) {
    if (entry.first == name) {
      entry.second = std::move(value);
      return;
    }
  }
  frame.emplace_back(name, std::move(value));
}

void Evaluator::assign(const AssignTarget& target, const Value& value, int line) {
  if (!target.namespace_attribute.empty()) {
    Value object = lookup(target.names[0], line);
    if (object.kind() != Value::Kind::kNamespace)
      fail(line, fmt::format("cannot assign the attribute '{}' of '{}', which is a {} and not a namespace()",
                             target.namespace_attribute, target.names[0], object.type_name()));
    if (target.namespace_attribute.starts_with('_'))
      fail(line, fmt::format("namespace attributes cannot start with '_' (got '{}')", target.namespace_attribute));
    object.namespace_attributes().set(target.namespace_attribute, value);
    return;
  }
  if (!target.unpack) {
    set_variable(target.names[0], value);
    return;
  }
  std::vector<Value> parts = iterate(value, line);
  if (parts.size() != target.names.size())
    fail(line, fmt::format("cannot unpack {} values into {} names", parts.size(), target.names.size()));
  for (size_t i = 0; i < parts.size(); ++i) set_variable(target.names[i], parts[i]);
}

Value Evaluator::lookup(const std::string& name, int line) {
  for (auto frame = frames_.rbegin(); frame != frames_.rend(); ++frame)
    for (const auto& entry : *frame)
      if (entry.first == name) return entry.second;
  return global_function(name, line);
}

// ---- macros and call blocks ----

Value Evaluator::make_macro(const MacroStatement& macro) {
  const MacroStatement* node = &macro;
  return Value::callable(macro.name, [node](Evaluator& evaluator, CallArguments& arguments, int line) {
    return evaluator.invoke_macro(node->name, node->parameters, node->body, arguments, line);
  });
}

Value Evaluator::invoke_macro(const std::string& name, const std::vector<MacroParameter>& parameters,
                              const StatementList& body, CallArguments& arguments, int line) {
  Frame frame;
  std::vector<Value> extra_positional;
  for (size_t i = 0; i < arguments.positional.size(); ++i) {
    if (i < parameters.size())
      frame.emplace_back(parameters[i].name, arguments.positional[i]);
    else
      extra_positional.push_back(arguments.positional[i]);
  }
  DictStorage extra_keyword;
  for (auto& keyword_argument : arguments.keyword) {
    // Plain references, not a structured binding: clang 14 (the fuzz build) cannot capture those.
    const auto& key = keyword_argument.first;
    const auto& value = keyword_argument.second;
    auto parameter = std::find_if(parameters.begin(), parameters.end(), [&](const auto& p) { return p.name == key; });
    if (parameter == parameters.end()) {
      if (key == "caller") {
        frame.emplace_back(key, value);
        continue;
      }
      extra_keyword.set(key, value);
      continue;
    }
    if (std::any_of(frame.begin(), frame.end(), [&](const auto& entry) { return entry.first == key; }))
      fail(line, fmt::format("macro '{}' got multiple values for the argument '{}'", name, key));
    frame.emplace_back(key, value);
  }
  // Only the template's top-level variables and the macro's own are visible inside a macro.
  std::vector<Frame> saved(std::make_move_iterator(frames_.begin() + 1), std::make_move_iterator(frames_.end()));
  frames_.resize(1);
  frames_.push_back(std::move(frame));
  for (const auto& parameter : parameters) {
    const Frame& current = frames_.back();
    bool given = std::any_of(current.begin(), current.end(), [&](const auto& e) { return e.first == parameter.name; });
    if (given) continue;
    Value value = parameter.default_value ? evaluate(*parameter.default_value)
                                          : Value::undefined(fmt::format("'{}' is undefined", parameter.name));
    frames_.back().emplace_back(parameter.name, std::move(value));
  }
  frames_.back().emplace_back("varargs", Value::list(std::move(extra_positional), true));
  frames_.back().emplace_back("kwargs", Value::dict(std::move(extra_keyword)));
  std::string text = capture(body);
  frames_.resize(1);
  for (auto& restored : saved) frames_.push_back(std::move(restored));
  return Value(std::move(text));
}

void Evaluator::execute_call_block(const CallBlockStatement& statement) {
  const CallBlockStatement* node = &statement;
  auto scope = std::make_shared<std::vector<Frame>>(frames_.begin() + 1, frames_.end());
  Value caller = Value::callable("caller", [node, scope](Evaluator& evaluator, CallArguments& arguments, int line) {
    std::vector<Frame> saved(std::make_move_iterator(evaluator.frames_.begin() + 1),
                             std::make_move_iterator(evaluator.frames_.end()));
    evaluator.frames_.resize(1);
    for (const auto& frame : *scope) evaluator.frames_.push_back(frame);
    Value result = evaluator.invoke_macro("caller", node->caller_parameters, node->body, arguments, line);
    evaluator.frames_.resize(1);
    for (auto& restored : saved) evaluator.frames_.push_back(std::move(restored));
    return result;
  });
  Value callee = evaluate(*statement.call->callee);
  CallArguments arguments = evaluate_arguments(statement.call->arguments);
  if (callee.kind() != Value::Kind::kCallable) fail(statement.line, "'{% call %}' needs a macro to call");
  // A macro reads `caller` from its own scope: pass it as a keyword the macro frame picks up.
  arguments.keyword.emplace_back("caller", caller);
  output_->append(call(callee, arguments, statement.line).str());
}

// ---- expressions ----

CallArguments Evaluator::evaluate_arguments(const ArgumentExpressions& arguments) {
  CallArguments result;
  result.positional.reserve(arguments.positional.size());
  for (const auto& argument : arguments.positional) result.positional.push_back(evaluate(*argument));
  for (const auto& [name, argument] : arguments.keyword) result.keyword.emplace_back(name, evaluate(*argument));
  return result;
}

Value Evaluator::evaluate(const Expression& expression) {
  if (stack_.exhausted()) fail(expression.line, "the template nests expressions or calls too deeply");
  count_step(expression.line);
  Value value = evaluate_node(expression);
  // Values are shared, not copied: a name, attribute or item lookup costs one step whatever its
  // size; an expression that computes a value pays for the size of what it built.
  const bool built = expression.kind != ExpressionKind::kLiteral && expression.kind != ExpressionKind::kName &&
                     expression.kind != ExpressionKind::kAttribute && expression.kind != ExpressionKind::kSubscript &&
                     expression.kind != ExpressionKind::kConditional;
  if (value.is_string()) {
    check_text_size(value.as_string().size(), expression.line);
    if (built) steps_ += value.as_string().size() >> 10;
  } else if (value.is_list()) {
    check_list_size(value.as_list().items.size(), expression.line);
    if (built) steps_ += value.as_list().items.size() >> 4;
  }
  return value;
}

Value Evaluator::evaluate_node(const Expression& expression) {
  switch (expression.kind) {
    case ExpressionKind::kLiteral:
      return static_cast<const LiteralExpression&>(expression).value;
    case ExpressionKind::kName:
      return lookup(static_cast<const NameExpression&>(expression).name, expression.line);
    case ExpressionKind::kList: {
      const auto& node = static_cast<const ListExpression&>(expression);
      std::vector<Value> items;
      items.reserve(node.items.size());
      for (const auto& item : node.items) items.push_back(evaluate(*item));
      return Value::list(std::move(items), node.is_tuple);
    }
    case ExpressionKind::kDict: {
      const auto& node = static_cast<const DictExpression&>(expression);
      DictStorage storage;
      for (const auto& [key_expression, value_expression] : node.items) {
        Value key = evaluate(*key_expression);
        if (!key.is_string())
          fail(expression.line, fmt::format("dict literal keys must be strings (got {})", key.type_name()));
        storage.set(key.as_string(), evaluate(*value_expression));
      }
      return Value::dict(std::move(storage));
    }
    case ExpressionKind::kUnary: {
      const auto& node = static_cast<const UnaryExpression&>(expression);
      Value operand = evaluate(*node.operand);
      if (node.op == UnaryOperator::kNot) return Value(!operand.truthy());
      if (operand.is_undefined()) fail_undefined(expression.line, operand);
      if (operand.kind() == Value::Kind::kFloat)
        return Value(node.op == UnaryOperator::kNegate ? -operand.as_float() : operand.as_float());
      if (operand.is_number()) {
        int64_t number = operand.kind() == Value::Kind::kBool ? int64_t{operand.as_bool()} : operand.as_int();
        if (node.op != UnaryOperator::kNegate) return Value(number);
        auto negated = integer_math::negate(number);
        if (!negated) fail(expression.line, fmt::format("integer overflow: -({}) does not fit in 64 bits", number));
        return Value(*negated);
      }
      fail(expression.line, fmt::format("bad operand type for unary {}: '{}'",
                                        node.op == UnaryOperator::kNegate ? '-' : '+', operand.type_name()));
    }
    case ExpressionKind::kBinary:
      return evaluate_binary(static_cast<const BinaryExpression&>(expression));
    case ExpressionKind::kConditional: {
      const auto& node = static_cast<const ConditionalExpression&>(expression);
      if (evaluate(*node.condition).truthy()) return evaluate(*node.then_value);
      if (node.else_value) return evaluate(*node.else_value);
      return Value::undefined("the inline if expression evaluated to false and has no else");
    }
    case ExpressionKind::kAttribute: {
      const auto& node = static_cast<const AttributeExpression&>(expression);
      return get_attribute(evaluate(*node.object), node.name, expression.line);
    }
    case ExpressionKind::kSubscript: {
      const auto& node = static_cast<const SubscriptExpression&>(expression);
      Value object = evaluate(*node.object);
      return get_item(object, evaluate(*node.index), expression.line);
    }
    case ExpressionKind::kSlice:
      return evaluate_slice(static_cast<const SliceExpression&>(expression));
    case ExpressionKind::kCall:
      return evaluate_call(static_cast<const CallExpression&>(expression));
    case ExpressionKind::kFilter: {
      const auto& node = static_cast<const FilterExpression&>(expression);
      return apply_filter(node, evaluate(*node.operand));
    }
    case ExpressionKind::kTest: {
      const auto& node = static_cast<const TestExpression&>(expression);
      Value operand = evaluate(*node.operand);
      CallArguments arguments = evaluate_arguments(node.arguments);
      bool result = node.function(*this, operand, arguments, expression.line);
      return Value(node.negated ? !result : result);
    }
  }
  return Value();
}

Value Evaluator::apply_filter(const FilterExpression& filter, const Value& input) {
  CallArguments arguments = evaluate_arguments(filter.arguments);
  return filter.function(*this, input, arguments, filter.line);
}

Value Evaluator::evaluate_call(const CallExpression& expression) {
  if (expression.callee->kind == ExpressionKind::kAttribute) {
    // `object.method(...)`: call str/dict/list methods directly, without a bound-method value.
    const auto& attribute = static_cast<const AttributeExpression&>(*expression.callee);
    Value object = evaluate(*attribute.object);
    if (object.is_undefined()) fail_undefined(expression.line, object);
    CallArguments arguments = evaluate_arguments(expression.arguments);
    Value result;
    if (call_method(object, attribute.name, arguments, expression.line, result)) return result;
    Value callee = get_attribute(object, attribute.name, expression.line);
    if (callee.is_undefined())
      fail(expression.line, fmt::format("'{}' object has no attribute '{}'", object.type_name(), attribute.name));
    return call(callee, arguments, expression.line);
  }
  Value callee = evaluate(*expression.callee);
  CallArguments arguments = evaluate_arguments(expression.arguments);
  return call(callee, arguments, expression.line);
}

// Nested macro calls (a recursive macro) are bounded, as Python bounds Jinja's recursion: without
// a limit, a macro that never stops recursing would overflow the stack and crash the process.
constexpr int kMaxCallDepth = 200;

Value Evaluator::call(const Value& callee, CallArguments& arguments, int line) {
  if (callee.is_undefined()) fail_undefined(line, callee);
  if (callee.kind() != Value::Kind::kCallable) fail(line, fmt::format("'{}' object is not callable", callee.type_name()));
  if (call_depth_ >= kMaxCallDepth) {
    fail(line, fmt::format("calls nest more than {} deep (a macro that recurses without end?)", kMaxCallDepth));
  }
  ++call_depth_;
  struct DepthGuard {
    int& depth;
    ~DepthGuard() { --depth; }
  } guard{call_depth_};
  return callee.as_callable().function(*this, arguments, line);
}

namespace {

// Python's slice.indices(length).
void adjust_slice(int64_t length, std::optional<int64_t> start_in, std::optional<int64_t> stop_in, int64_t step,
                  int64_t& start, int64_t& stop) {
  auto clamp = [&](std::optional<int64_t> value, int64_t default_value) {
    if (!value) return default_value;
    int64_t v = *value;
    if (v < 0) {
      v += length;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= length) {
      v = step < 0 ? length - 1 : length;
    }
    return v;
  };
  start = clamp(start_in, step < 0 ? length - 1 : 0);
  stop = clamp(stop_in, step < 0 ? -1 : length);
}

}  // namespace

Value Evaluator::evaluate_slice(const SliceExpression& expression) {
  Value object = evaluate(*expression.object);
  if (object.is_undefined()) fail_undefined(expression.line, object);
  auto bound = [&](const ExpressionPointer& part) -> std::optional<int64_t> {
    if (!part) return std::nullopt;
    Value value = evaluate(*part);
    if (value.is_none()) return std::nullopt;
    if (value.kind() == Value::Kind::kInt) return value.as_int();
    if (value.kind() == Value::Kind::kBool) return int64_t{value.as_bool()};
    fail(expression.line, fmt::format("slice indices must be integers or None (got {})", value.type_name()));
  };
  std::optional<int64_t> start_value = bound(expression.start);
  std::optional<int64_t> stop_value = bound(expression.stop);
  int64_t step = bound(expression.step).value_or(1);
  if (step == 0) fail(expression.line, "slice step cannot be zero");
  auto select = [&](int64_t length, auto&& take) {
    int64_t start = 0;
    int64_t stop = 0;
    adjust_slice(length, start_value, stop_value, step, start, stop);
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      take(static_cast<size_t>(i));
      auto next = integer_math::add(i, step);
      if (!next) break;  // past 64 bits is past the end too
      i = *next;
    }
  };
  if (object.is_string()) {
    std::u32string points = utf8_decode(object.as_string());
    std::u32string out;
    select(static_cast<int64_t>(points.size()), [&](size_t i) { out.push_back(points[i]); });
    return Value(utf8_encode(out));
  }
  if (object.is_list()) {
    const auto& items = object.as_list().items;
    std::vector<Value> out;
    select(static_cast<int64_t>(items.size()), [&](size_t i) { out.push_back(items[i]); });
    return Value::list(std::move(out), object.as_list().is_tuple);
  }
  fail(expression.line, fmt::format("'{}' object is not subscriptable", object.type_name()));
}

std::vector<Value> Evaluator::iterate(const Value& value, int line) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return value.as_list().items;
    case Value::Kind::kString: {
      std::vector<Value> characters;
      for (char32_t c : utf8_decode(value.as_string())) characters.emplace_back(utf8_encode(std::u32string(1, c)));
      return characters;
    }
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& entry : value.as_dict().entries) keys.emplace_back(entry.first);
      return keys;
    }
    default:
      fail(line, fmt::format("'{}' object is not iterable", value.type_name()));
  }
}

}  // namespace surogate::chat_template
