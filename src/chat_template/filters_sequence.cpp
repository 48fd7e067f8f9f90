// Sequence filters (see filters_sequence.h), following jinja2 3.1: case-insensitive by default
// for sort/unique/min/max, `select`/`reject` take a test name, `map` takes a filter name or
// `attribute=`.
#include "chat_template/filters_sequence.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "chat_template/arguments.h"
#include "chat_template/evaluator.h"
#include "chat_template/integer_math.h"
#include "chat_template/python_strings.h"

namespace surogate::chat_template {
namespace {

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
Value get_attribute_path(Evaluator& evaluator, const Value& item, const Value& path, int line) {
  if (path.kind() == Value::Kind::kInt) return evaluator.get_item(item, path, line);
  if (!path.is_string()) evaluator.fail(line, fmt::format("attribute must be a string, not {}", path.type_name()));
  Value current = item;
  for (const auto& part : python_split(path.as_string(), std::string("."), -1, false)) {
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    int64_t index = 0;
    if (numeric && std::from_chars(part.data(), part.data() + part.size(), index).ec != std::errc())
      evaluator.fail(line, fmt::format("attribute '{}': the index {} is too large", path.as_string(), part));
    current = evaluator.get_item(current, numeric ? Value(index) : Value(part), line);
  }
  return current;
}

// The value used to compare items: lower-cased strings unless case_sensitive.
Value sort_key(const Value& value, bool case_sensitive) {
  if (!case_sensitive && value.is_string()) return Value(python_lower(value.as_string()));
  return value;
}

bool less_than(Evaluator& evaluator, const Value& left, const Value& right, int line) {
  auto less = value_less(left, right);
  if (!less)
    evaluator.fail(line, fmt::format("'<' not supported between instances of '{}' and '{}'", left.type_name(),
                                     right.type_name()));
  return *less;
}

CallArguments rest_arguments(const CallArguments& arguments, size_t skip) {
  CallArguments rest;
  if (arguments.positional.size() > skip)
    rest.positional.assign(arguments.positional.begin() + static_cast<std::ptrdiff_t>(skip), arguments.positional.end());
  rest.keyword = arguments.keyword;
  return rest;
}

Value select_items(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line, bool by_attribute,
                   bool keep_matches) {
  const char* name = by_attribute ? (keep_matches ? "selectattr" : "rejectattr") : (keep_matches ? "select" : "reject");
  size_t first_test_argument = by_attribute ? 1 : 0;
  if (by_attribute && arguments.positional.empty()) evaluator.fail(line, fmt::format("{}() needs an attribute", name));
  std::optional<std::string> test_name;
  if (arguments.positional.size() > first_test_argument) {
    const Value& test = arguments.positional[first_test_argument];
    if (!test.is_string()) evaluator.fail(line, fmt::format("{}(): the test name must be a string", name));
    test_name = test.as_string();
  }
  CallArguments test_arguments = rest_arguments(arguments, first_test_argument + 1);
  std::vector<Value> kept;
  for (const auto& item : evaluator.iterate(value, line)) {
    Value subject = by_attribute ? get_attribute_path(evaluator, item, arguments.positional[0], line) : item;
    CallArguments call_arguments = test_arguments;
    bool matches = test_name ? evaluator.apply_test_by_name(*test_name, subject, call_arguments, line) : subject.truthy();
    if (matches == keep_matches) kept.push_back(item);
  }
  return Value::list(std::move(kept));
}

Value min_or_max(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line, bool want_max) {
  ArgumentReader reader(evaluator, arguments, want_max ? "max" : "min", {"case_sensitive", "attribute"}, line);
  bool case_sensitive = reader.boolean(0, false);
  Value attribute = reader.get(1);
  std::vector<Value> items = evaluator.iterate(value, line);
  if (items.empty()) return Value::undefined(fmt::format("No aggregated item, sequence was empty."));
  auto key = [&](const Value& item) {
    return sort_key(attribute.is_none() ? item : get_attribute_path(evaluator, item, attribute, line), case_sensitive);
  };
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    bool better = want_max ? less_than(evaluator, key(items[best]), key(items[i]), line)
                           : less_than(evaluator, key(items[i]), key(items[best]), line);
    if (better) best = i;
  }
  return items[best];
}

}  // namespace

Value filter_join(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "join", {"d", "attribute"}, line);
  std::string separator = reader.get(0, Value(std::string())).str();
  Value attribute = reader.get(1);
  std::string out;
  bool first = true;
  for (const auto& item : evaluator.iterate(value, line)) {
    if (!first) out += separator;
    first = false;
    out += (attribute.is_none() ? item : get_attribute_path(evaluator, item, attribute, line)).str();
  }
  return Value(std::move(out));
}

Value filter_first(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "first", {}, line);
  std::vector<Value> items = evaluator.iterate(value, line);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value filter_last(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "last", {}, line);
  std::vector<Value> items = evaluator.iterate(value, line);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value filter_list(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "list", {}, line);
  return Value::list(evaluator.iterate(value, line));
}

Value filter_map(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  std::vector<Value> out;
  const Value* attribute = nullptr;
  const Value* default_value = nullptr;
  for (const auto& [name, argument] : arguments.keyword) {
    if (name == "attribute") attribute = &argument;
    else if (name == "default") default_value = &argument;
  }
  if (attribute) {
    for (const auto& item : evaluator.iterate(value, line)) {
      Value mapped = get_attribute_path(evaluator, item, *attribute, line);
      out.push_back(mapped.is_undefined() && default_value ? *default_value : mapped);
    }
    return Value::list(std::move(out));
  }
  if (arguments.positional.empty() || !arguments.positional[0].is_string())
    evaluator.fail(line, "map() needs a filter name or attribute=");
  std::string filter_name = arguments.positional[0].as_string();
  CallArguments filter_arguments = rest_arguments(arguments, 1);
  for (const auto& item : evaluator.iterate(value, line)) {
    CallArguments call_arguments = filter_arguments;
    out.push_back(evaluator.apply_filter_by_name(filter_name, item, call_arguments, line));
  }
  return Value::list(std::move(out));
}

Value filter_select(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  return select_items(evaluator, value, arguments, line, false, true);
}
Value filter_reject(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  return select_items(evaluator, value, arguments, line, false, false);
}
Value filter_selectattr(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  return select_items(evaluator, value, arguments, line, true, true);
}
Value filter_rejectattr(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  return select_items(evaluator, value, arguments, line, true, false);
}

Value filter_unique(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "unique", {"case_sensitive", "attribute"}, line);
  bool case_sensitive = reader.boolean(0, false);
  Value attribute = reader.get(1);
  std::vector<Value> seen;
  std::vector<Value> out;
  for (const auto& item : evaluator.iterate(value, line)) {
    Value key =
        sort_key(attribute.is_none() ? item : get_attribute_path(evaluator, item, attribute, line), case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& other) { return values_equal(other, key); })) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value filter_sort(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "sort", {"reverse", "case_sensitive", "attribute"}, line);
  bool reverse = reader.boolean(0, false);
  bool case_sensitive = reader.boolean(1, false);
  Value attribute = reader.get(2);
  std::vector<Value> items = evaluator.iterate(value, line);
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& item : items)
    keyed.emplace_back(
        sort_key(attribute.is_none() ? item : get_attribute_path(evaluator, item, attribute, line), case_sensitive),
        item);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less_than(evaluator, b.first, a.first, line) : less_than(evaluator, a.first, b.first, line);
  });
  std::vector<Value> out;
  for (auto& entry : keyed) out.push_back(std::move(entry.second));
  return Value::list(std::move(out));
}

Value filter_reverse(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "reverse", {}, line);
  if (value.is_string()) {
    std::u32string points = utf8_decode(value.as_string());
    std::reverse(points.begin(), points.end());
    return Value(utf8_encode(points));
  }
  std::vector<Value> items = evaluator.iterate(value, line);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value filter_sum(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "sum", {"attribute", "start"}, line);
  Value attribute = reader.get(0);
  Value total = reader.get(1, Value(int64_t{0}));
  for (const auto& item : evaluator.iterate(value, line)) {
    Value term = attribute.is_none() ? item : get_attribute_path(evaluator, item, attribute, line);
    if (!term.is_number() || !total.is_number())
      evaluator.fail(line, fmt::format("sum(): cannot add {} and {}", total.type_name(), term.type_name()));
    bool integers = total.kind() != Value::Kind::kFloat && term.kind() != Value::Kind::kFloat;
    if (!integers) {
      total = Value(total.to_double() + term.to_double());
      continue;
    }
    // Exact in int64 (through double, a large int lost its low digits or overflowed the cast).
    auto as_integer = [](const Value& number) {
      return number.kind() == Value::Kind::kBool ? int64_t{number.as_bool()} : number.as_int();
    };
    auto sum = integer_math::add(as_integer(total), as_integer(term));
    if (!sum) evaluator.fail(line, "sum(): integer overflow: the total does not fit in 64 bits");
    total = Value(*sum);
  }
  return total;
}

Value filter_min(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  return min_or_max(evaluator, value, arguments, line, false);
}
Value filter_max(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  return min_or_max(evaluator, value, arguments, line, true);
}

Value filter_dictsort(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "dictsort", {"case_sensitive", "by", "reverse"}, line);
  bool case_sensitive = reader.boolean(0, false);
  std::string by = reader.string(1, "key");
  bool reverse = reader.boolean(2, false);
  if (!value.is_dict()) evaluator.fail(line, fmt::format("dictsort needs a dict, not {}", value.type_name()));
  if (by != "key" && by != "value") evaluator.fail(line, "dictsort: 'by' must be 'key' or 'value'");
  std::vector<std::pair<std::string, Value>> entries = value.as_dict().entries;
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) {
    Value left = sort_key(by == "key" ? Value(a.first) : a.second, case_sensitive);
    Value right = sort_key(by == "key" ? Value(b.first) : b.second, case_sensitive);
    return reverse ? less_than(evaluator, right, left, line) : less_than(evaluator, left, right, line);
  });
  std::vector<Value> out;
  for (auto& [key, item] : entries) out.push_back(Value::list({Value(key), item}, true));
  return Value::list(std::move(out));
}

Value filter_batch(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line) {
  ArgumentReader reader(evaluator, arguments, "batch", {"linecount", "fill_with"}, line);
  int64_t size = reader.integer(0, 1);
  if (size <= 0) evaluator.fail(line, "batch: linecount must be positive");
  const Value* fill = reader.find(1);
  std::vector<Value> out;
  std::vector<Value> current;
  for (const auto& item : evaluator.iterate(value, line)) {
    current.push_back(item);
    if (static_cast<int64_t>(current.size()) == size) {
      out.push_back(Value::list(std::move(current)));
      current.clear();
    }
  }
  if (!current.empty()) {
    if (fill && !fill->is_none())
      while (static_cast<int64_t>(current.size()) < size) current.push_back(*fill);
    out.push_back(Value::list(std::move(current)));
  }
  return Value::list(std::move(out));
}

}  // namespace surogate::chat_template
