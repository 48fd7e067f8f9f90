// Jinja filters (`x | name(args)`) with jinja2 3.1's behaviour, except `tojson`, which is
// Hugging Face's: json.dumps(x, ensure_ascii=False, indent, separators, sort_keys) with the same
// positional order, so `tojson(indent=2)` and `tojson` output match transformers byte for byte.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <unicode/uchar.h>

#include "chat_template/arguments.h"
#include "chat_template/evaluator.h"
#include "chat_template/integer_math.h"
#include "chat_template/filters_sequence.h"
#include "chat_template/parser.h"
#include "chat_template/python_strings.h"

namespace surogate::chat_template {
namespace {

using Kind = Value::Kind;

Value filter_length(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "length", {}, line);
  switch (value.kind()) {
    case Kind::kUndefined:
      return Value(int64_t{0});
    case Kind::kString:
      return Value(static_cast<int64_t>(utf8_length(value.as_string())));
    case Kind::kList:
      return Value(static_cast<int64_t>(value.as_list().items.size()));
    case Kind::kDict:
      return Value(static_cast<int64_t>(value.as_dict().entries.size()));
    case Kind::kLoop:
      return Value(static_cast<int64_t>(value.as_loop().items->size()));
    default:
      evaluator.fail(line, fmt::format("object of type '{}' has no len()", value.type_name()));
  }
}

Value filter_trim(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "trim", {"chars"}, line);
  return Value(python_strip(value.str(), reader.optional_string(0), true, true));
}

#define STRING_FILTER(function_name, filter_name, transform)                                           \
  Value function_name(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) { \
    ArgumentReader reader(evaluator, arguments, filter_name, {}, line);                                \
    return Value(transform(value.str()));                                                              \
  }

STRING_FILTER(filter_upper, "upper", python_upper)
STRING_FILTER(filter_lower, "lower", python_lower)
STRING_FILTER(filter_capitalize, "capitalize", python_capitalize)
STRING_FILTER(filter_title, "title", jinja_title)

Value filter_string(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "string", {}, line);
  return Value(value.str());
}

Value filter_default(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "default", {"default_value", "boolean"}, line);
  bool use_default = value.is_undefined() || (reader.boolean(1, false) && !value.truthy());
  return use_default ? reader.get(0, Value(std::string())) : value;
}

Value filter_tojson(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"}, line);
  JsonDumpOptions options;
  options.ensure_ascii = reader.boolean(0, false);
  Value indent = reader.get(1);
  if (indent.kind() == Kind::kInt || indent.kind() == Kind::kBool) {
    const int64_t spaces = std::max<int64_t>(0, indent.kind() == Kind::kBool ? indent.as_bool() : indent.as_int());
    evaluator.check_text_size(static_cast<uint64_t>(spaces), line);
    options.indent = std::string(static_cast<size_t>(spaces), ' ');
  } else if (indent.is_string()) {
    options.indent = indent.as_string();
  } else if (!indent.is_none()) {
    reader.type_error(1, "an integer or a string", indent);
  }
  Value separators = reader.get(2);
  if (!separators.is_none()) {
    if (!separators.is_list() || separators.as_list().items.size() != 2 || !separators.as_list().items[0].is_string() ||
        !separators.as_list().items[1].is_string())
      reader.type_error(2, "a pair of strings", separators);
    options.separators = {separators.as_list().items[0].as_string(), separators.as_list().items[1].as_string()};
  }
  options.sort_keys = reader.boolean(3, false);
  return Value(python_json_dumps(value, options, [&](const std::string& message) { evaluator.fail(line, message); }));
}

Value filter_int(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "int", {"default", "base"}, line);
  Value fallback = reader.get(0, Value(int64_t{0}));
  switch (value.kind()) {
    case Kind::kInt:
      return value;
    case Kind::kBool:
      return Value(int64_t{value.as_bool()});
    case Kind::kFloat:
      if (!std::isfinite(value.as_float())) return fallback;
      if (auto truncated = integer_math::truncate(value.as_float())) return Value(*truncated);
      evaluator.fail(line, fmt::format("int(): {} does not fit in 64 bits", value.repr()));
    case Kind::kString: {
      std::string text = python_strip(value.as_string(), std::nullopt, true, true);
      int base = static_cast<int>(reader.integer(1, 10));
      try {
        size_t used = 0;
        int64_t number = std::stoll(text, &used, base);
        if (used == text.size()) return Value(number);
      } catch (const std::exception&) {
      }
      try {
        size_t used = 0;
        double number = std::stod(text, &used);
        if (used == text.size() && std::isfinite(number)) {
          if (auto truncated = integer_math::truncate(number)) return Value(*truncated);
        }
      } catch (const std::exception&) {
      }
      return fallback;
    }
    default:
      return fallback;
  }
}

Value filter_float(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "float", {"default"}, line);
  Value fallback = reader.get(0, Value(0.0));
  if (value.is_number()) return Value(value.to_double());
  if (value.is_string()) {
    std::string text = python_strip(value.as_string(), std::nullopt, true, true);
    try {
      size_t used = 0;
      double number = std::stod(text, &used);
      if (used == text.size()) return Value(number);
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

Value filter_abs(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "abs", {}, line);
  if (value.kind() == Kind::kFloat) return Value(std::fabs(value.as_float()));
  if (value.kind() == Kind::kInt) {
    if (value.as_int() >= 0) return value;
    auto negated = integer_math::negate(value.as_int());
    if (!negated) evaluator.fail(line, fmt::format("abs(): integer overflow: abs({}) does not fit in 64 bits", value.as_int()));
    return Value(*negated);
  }
  if (value.kind() == Kind::kBool) return Value(int64_t{value.as_bool()});
  evaluator.fail(line, fmt::format("bad operand type for abs(): '{}'", value.type_name()));
}

Value filter_replace(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "replace", {"old", "new", "count"}, line);
  return Value(python_replace(value.str(), reader.require(0).str(), reader.require(1).str(), reader.integer(2, -1)));
}

Value filter_items(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "items", {}, line);
  if (value.is_undefined()) return Value::list({});
  if (!value.is_dict()) evaluator.fail(line, fmt::format("the 'items' filter needs a dict, not {}", value.type_name()));
  std::vector<Value> items;
  for (const auto& [key, item] : value.as_dict().entries) items.push_back(Value::list({Value(key), item}, true));
  return Value::list(std::move(items));
}

Value filter_round(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "round", {"precision", "method"}, line);
  int64_t precision = reader.integer(0, 0);
  std::string method = reader.string(1, "common");
  if (!value.is_number()) evaluator.fail(line, fmt::format("round needs a number, not {}", value.type_name()));
  if (method != "common" && method != "ceil" && method != "floor")
    evaluator.fail(line, "round: method must be 'common', 'ceil' or 'floor'");
  if (method == "common" && value.kind() != Kind::kFloat) return value;  // Python's round(int, n) stays int
  double scale = std::pow(10.0, static_cast<double>(precision));
  double scaled = value.to_double() * scale;
  double rounded = method == "ceil" ? std::ceil(scaled) : method == "floor" ? std::floor(scaled) : std::nearbyint(scaled);
  return Value(rounded / scale);
}

Value filter_indent(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "indent", {"width", "first", "blank"}, line);
  Value width = reader.get(0, Value(int64_t{4}));
  const int64_t spaces = width.is_string() ? 0 : std::max<int64_t>(0, reader.integer(0, 4));
  evaluator.check_text_size(static_cast<uint64_t>(spaces), line);
  std::string indentation = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(spaces), ' ');
  std::vector<std::string> lines = python_splitlines(value.str() + "\n");
  // Bound the result before building it: every line may get the indentation.
  evaluator.check_text_size(value.str().size() + lines.size() * (indentation.size() + 1), line);
  std::string out;
  if (reader.boolean(2, false)) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out.append("\n").append(indentation);
      out += lines[i];
    }
  } else {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += '\n';
      if (i && !lines[i].empty()) out += indentation;
      out += lines[i];
    }
  }
  if (reader.boolean(1, false)) out = indentation + out;
  return Value(std::move(out));
}

Value filter_wordcount(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "wordcount", {}, line);
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(value.str())) {
    bool word_character = c == U'_' || u_isalnum(static_cast<UChar32>(c));
    if (word_character && !in_word) ++words;
    in_word = word_character;
  }
  return Value(words);
}

Value filter_center(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "center", {"width"}, line);
  std::string text = value.str();
  int64_t width = reader.integer(0, 80);
  int64_t length = static_cast<int64_t>(utf8_length(text));
  if (width <= length) return Value(text);
  evaluator.check_text_size(static_cast<uint64_t>(width), line);
  int64_t margin = width - length;
  int64_t left = margin / 2 + (margin & width & 1);
  return Value(std::string(static_cast<size_t>(left), ' ') + text + std::string(static_cast<size_t>(margin - left), ' '));
}

Value filter_escape(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "escape", {}, line);
  std::string out;
  for (char c : value.str()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

// printf-style `"%s and %d" | format(a, b)` for %s, %d, %i and %%.
Value filter_format(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  if (!arguments.keyword.empty()) evaluator.fail(line, "the 'format' filter with keyword arguments is not supported");
  std::string pattern = value.str();
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      out += pattern[i];
      continue;
    }
    if (i + 1 >= pattern.size()) evaluator.fail(line, "format: incomplete format");
    char conversion = pattern[++i];
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (conversion != 's' && conversion != 'd' && conversion != 'i')
      evaluator.fail(line, fmt::format("format: the conversion '%{}' is not supported (only %s, %d, %i)", conversion));
    if (next >= arguments.positional.size()) evaluator.fail(line, "format: not enough arguments for format string");
    const Value& argument = arguments.positional[next++];
    if (conversion == 's') {
      out += argument.str();
    } else {
      if (!argument.is_number())
        evaluator.fail(line, fmt::format("format: %{} needs a number, not {}", conversion, argument.type_name()));
      std::optional<int64_t> number = argument.kind() == Kind::kFloat ? integer_math::truncate(argument.as_float())
                                      : argument.kind() == Kind::kBool  ? int64_t{argument.as_bool()}
                                                                        : argument.as_int();
      if (!number) evaluator.fail(line, fmt::format("format: %{} of {} does not fit in 64 bits", conversion, argument.repr()));
      out += std::to_string(*number);
    }
  }
  if (next != arguments.positional.size())
    evaluator.fail(line, "format: not all arguments converted during string formatting");
  return Value(std::move(out));
}

Value filter_attr(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "attr", {"name"}, line);
  return evaluator.get_attribute(value, reader.string(0), line);
}

const std::map<std::string, FilterFunction, std::less<>>& filter_registry() {
  static const std::map<std::string, FilterFunction, std::less<>> registry = {
      {"length", filter_length},   {"count", filter_length},     {"trim", filter_trim},
      {"upper", filter_upper},     {"lower", filter_lower},      {"capitalize", filter_capitalize},
      {"title", filter_title},     {"string", filter_string},    {"default", filter_default},
      {"d", filter_default},       {"tojson", filter_tojson},    {"int", filter_int},
      {"float", filter_float},     {"abs", filter_abs},          {"replace", filter_replace},
      {"safe", filter_string},     {"items", filter_items},      {"round", filter_round},
      {"indent", filter_indent},   {"wordcount", filter_wordcount}, {"center", filter_center},
      {"escape", filter_escape},   {"e", filter_escape},         {"format", filter_format},
      {"attr", filter_attr},       {"join", filter_join},        {"first", filter_first},
      {"last", filter_last},       {"list", filter_list},        {"map", filter_map},
      {"select", filter_select},   {"reject", filter_reject},    {"selectattr", filter_selectattr},
      {"rejectattr", filter_rejectattr}, {"unique", filter_unique}, {"sort", filter_sort},
      {"reverse", filter_reverse}, {"sum", filter_sum},          {"min", filter_min},
      {"max", filter_max},         {"dictsort", filter_dictsort}, {"batch", filter_batch},
  };
  return registry;
}

}  // namespace

FilterFunction find_filter(std::string_view name) {
  const auto& registry = filter_registry();
  auto found = registry.find(name);
  return found == registry.end() ? nullptr : found->second;
}

std::vector<std::string> filter_names() {
  std::vector<std::string> names;
  for (const auto& entry : filter_registry()) names.push_back(entry.first);
  return names;
}

}  // namespace surogate::chat_template
