// Methods templates call on values: str (strip, split, startswith, format, ...), dict (items,
// keys, values, get), list (count, index) and loop.cycle. Methods that modify a list or dict are
// refused, as in Hugging Face's immutable sandbox.
#include <algorithm>
#include <charconv>
#include <array>

#include <fmt/format.h>

#include "chat_template/arguments.h"
#include "chat_template/evaluator.h"
#include "chat_template/python_strings.h"

namespace surogate::chat_template {
namespace {

constexpr std::array<std::string_view, 26> kStringMethods = {
    "startswith", "endswith", "strip",   "lstrip",       "rstrip",       "split",   "rsplit",  "replace", "upper",
    "lower",      "title",    "capitalize", "find",      "rfind",        "count",   "join",    "format",  "splitlines",
    "removeprefix", "removesuffix", "isdigit", "isalpha", "isalnum",     "isspace", "isupper", "islower"};
constexpr std::array<std::string_view, 4> kDictMethods = {"items", "keys", "values", "get"};
constexpr std::array<std::string_view, 2> kListMethods = {"count", "index"};
constexpr std::array<std::string_view, 11> kMutatingMethods = {"append", "extend", "insert", "remove",
                                                               "pop",    "clear",  "sort",   "reverse",
                                                               "update", "setdefault", "popitem"};

template <size_t N>
bool contains(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<std::string> prefixes(Evaluator& evaluator, const Value& argument, const char* method, int line) {
  if (argument.is_string()) return {argument.as_string()};
  if (argument.is_list() && argument.as_list().is_tuple) {
    std::vector<std::string> out;
    for (const auto& item : argument.as_list().items) {
      if (!item.is_string()) evaluator.fail(line, fmt::format("{}(): tuple items must be strings", method));
      out.push_back(item.as_string());
    }
    return out;
  }
  evaluator.fail(line, fmt::format("{}() takes a string or a tuple of strings, not {}", method, argument.type_name()));
}

// str.format with automatic ({}), numbered ({0}) and named ({name}) fields.
std::string python_format(Evaluator& evaluator, const std::string& pattern, CallArguments& arguments, int line) {
  std::string out;
  size_t automatic = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '}') {
      if (i + 1 < pattern.size() && pattern[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      evaluator.fail(line, "format(): single '}' encountered in the format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < pattern.size() && pattern[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = pattern.find('}', i);
    if (close == std::string::npos) evaluator.fail(line, "format(): unmatched '{' in the format string");
    std::string field = pattern.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos)
      evaluator.fail(line, fmt::format("format(): the field '{{{}}}' uses a format spec, conversion or lookup, which "
                                       "is not supported",
                                       field));
    const Value* value = nullptr;
    if (field.empty()) {
      if (automatic >= arguments.positional.size())
        evaluator.fail(line, "format(): not enough positional arguments");
      value = &arguments.positional[automatic++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t index = 0;
      if (std::from_chars(field.data(), field.data() + field.size(), index).ec != std::errc() ||
          index >= arguments.positional.size())
        evaluator.fail(line, fmt::format("format(): no positional argument {}", field));
      value = &arguments.positional[index];
    } else {
      for (const auto& [name, argument] : arguments.keyword)
        if (name == field) value = &argument;
      if (!value) evaluator.fail(line, fmt::format("format(): no keyword argument '{}'", field));
    }
    out += value->str();
    i = close;
  }
  return out;
}

bool all_code_points(const std::string& text, bool (*predicate)(char32_t)) {
  std::u32string points = utf8_decode(text);
  return !points.empty() && std::all_of(points.begin(), points.end(), predicate);
}

Value string_method(Evaluator& evaluator, const std::string& text, const std::string& name, CallArguments& arguments,
                    int line) {
  if (name == "startswith" || name == "endswith") {
    ArgumentReader reader(evaluator, arguments, name, {"prefix"}, line);
    for (const auto& prefix : prefixes(evaluator, reader.require(0), name.c_str(), line))
      if (name == "startswith" ? text.starts_with(prefix) : text.ends_with(prefix)) return Value(true);
    return Value(false);
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgumentReader reader(evaluator, arguments, name, {"chars"}, line);
    return Value(python_strip(text, reader.optional_string(0), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    ArgumentReader reader(evaluator, arguments, name, {"sep", "maxsplit"}, line);
    auto separator = reader.optional_string(0);
    if (separator && separator->empty()) evaluator.fail(line, fmt::format("{}(): empty separator", name));
    std::vector<Value> parts;
    for (auto& part : python_split(text, separator, reader.integer(1, -1), name == "rsplit"))
      parts.emplace_back(std::move(part));
    return Value::list(std::move(parts));
  }
  if (name == "replace") {
    ArgumentReader reader(evaluator, arguments, name, {"old", "new", "count"}, line);
    return Value(python_replace(text, reader.string(0), reader.string(1), reader.integer(2, -1)));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "splitlines" ||
      name.starts_with("is")) {
    ArgumentReader reader(evaluator, arguments, name, {}, line);
    if (name == "upper") return Value(python_upper(text));
    if (name == "lower") return Value(python_lower(text));
    if (name == "title") return Value(python_title(text));
    if (name == "capitalize") return Value(python_capitalize(text));
    if (name == "isspace") return Value(all_code_points(text, is_python_whitespace));
    if (name == "isdigit") return Value(all_code_points(text, [](char32_t c) { return c >= U'0' && c <= U'9'; }));
    if (name == "isalpha" || name == "isalnum") {
      bool alnum = name == "isalnum";
      std::u32string points = utf8_decode(text);
      return Value(!points.empty() && std::all_of(points.begin(), points.end(), [&](char32_t c) {
        bool letter = (c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z') || (c >= 0x80 && !is_python_whitespace(c));
        return letter || (alnum && c >= U'0' && c <= U'9');
      }));
    }
    if (name == "isupper" || name == "islower") {
      std::string other = name == "isupper" ? python_lower(text) : python_upper(text);
      std::string same = name == "isupper" ? python_upper(text) : python_lower(text);
      return Value(same == text && other != text);
    }
    std::vector<Value> lines;
    for (auto& piece : python_splitlines(text)) lines.emplace_back(std::move(piece));
    return Value::list(std::move(lines));
  }
  if (name == "find" || name == "rfind" || name == "count") {
    ArgumentReader reader(evaluator, arguments, name, {"sub"}, line);
    std::string needle = reader.string(0);
    if (name == "count") {
      if (needle.empty()) return Value(static_cast<int64_t>(utf8_length(text) + 1));
      int64_t count = 0;
      for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++count;
      return Value(count);
    }
    size_t at = name == "find" ? text.find(needle) : text.rfind(needle);
    if (at == std::string::npos) return Value(int64_t{-1});
    return Value(static_cast<int64_t>(utf8_length(std::string_view(text).substr(0, at))));
  }
  if (name == "join") {
    ArgumentReader reader(evaluator, arguments, name, {"iterable"}, line);
    std::string out;
    bool first = true;
    for (const auto& item : evaluator.iterate(reader.require(0), line)) {
      if (!item.is_string())
        evaluator.fail(line, fmt::format("join(): expected str items, found {}", item.type_name()));
      if (!first) out += text;
      first = false;
      out += item.as_string();
    }
    return Value(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ArgumentReader reader(evaluator, arguments, name, {"affix"}, line);
    std::string affix = reader.string(0);
    if (name == "removeprefix" && text.starts_with(affix)) return Value(text.substr(affix.size()));
    if (name == "removesuffix" && !affix.empty() && text.ends_with(affix))
      return Value(text.substr(0, text.size() - affix.size()));
    return Value(text);
  }
  return Value(python_format(evaluator, text, arguments, line));  // "format"
}

}  // namespace

bool has_method(const Value& object, std::string_view name) {
  switch (object.kind()) {
    case Value::Kind::kString:
      return contains(kStringMethods, name);
    case Value::Kind::kDict:
      return contains(kDictMethods, name) || contains(kMutatingMethods, name);
    case Value::Kind::kList:
      return contains(kListMethods, name) || contains(kMutatingMethods, name);
    case Value::Kind::kLoop:
      return name == "cycle";
    default:
      return false;
  }
}

bool Evaluator::call_method(const Value& object, const std::string& name, CallArguments& arguments, int line,
                            Value& result) {
  if (!has_method(object, name)) return false;
  if (contains(kMutatingMethods, name) && (object.is_list() || object.is_dict()))
    fail(line, fmt::format("'{}.{}()' modifies a {}, which chat templates may not do (Hugging Face renders them in an "
                           "immutable sandbox); build a new value instead",
                           object.type_name(), name, object.type_name()));
  switch (object.kind()) {
    case Value::Kind::kString:
      result = string_method(*this, object.as_string(), name, arguments, line);
      return true;
    case Value::Kind::kDict: {
      const auto& entries = object.as_dict().entries;
      if (name == "get") {
        ArgumentReader reader(*this, arguments, name, {"key", "default"}, line);
        const Value& key = reader.require(0);
        const Value* found = key.is_string() ? object.as_dict().find(key.as_string()) : nullptr;
        result = found ? *found : reader.get(1);
        return true;
      }
      ArgumentReader reader(*this, arguments, name, {}, line);
      std::vector<Value> items;
      for (const auto& [key, value] : entries) {
        if (name == "items")
          items.push_back(Value::list({Value(key), value}, true));
        else if (name == "keys")
          items.emplace_back(key);
        else
          items.push_back(value);
      }
      result = Value::list(std::move(items));
      return true;
    }
    case Value::Kind::kList: {
      ArgumentReader reader(*this, arguments, name, {"value"}, line);
      const Value& needle = reader.require(0);
      const auto& items = object.as_list().items;
      if (name == "count") {
        result = Value(static_cast<int64_t>(
            std::count_if(items.begin(), items.end(), [&](const Value& item) { return values_equal(item, needle); })));
        return true;
      }
      for (size_t i = 0; i < items.size(); ++i) {
        if (values_equal(items[i], needle)) {
          result = Value(static_cast<int64_t>(i));
          return true;
        }
      }
      fail(line, fmt::format("{} is not in the list", needle.repr()));
    }
    case Value::Kind::kLoop: {
      if (arguments.positional.empty()) fail(line, "loop.cycle() needs at least one value");
      result = arguments.positional[object.as_loop().index0 % arguments.positional.size()];
      return true;
    }
    default:
      return false;
  }
}

}  // namespace surogate::chat_template
