// Python semantics of template values: printing (str / repr), truthiness, equality, ordering, and
// json.dumps as Hugging Face's `tojson` calls it.
#include "chat_template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <unicode/uchar.h>

#include "chat_template/python_strings.h"
#include "core/error.h"

namespace surogate::chat_template {

const Value* DictStorage::find(std::string_view key) const {
  for (const auto& entry : entries)
    if (entry.first == key) return &entry.second;
  return nullptr;
}

void DictStorage::set(std::string key, Value value) {
  for (auto& entry : entries) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string hint) {
  return Value(Data(UndefinedTag{std::make_shared<const std::string>(std::move(hint))}));
}

Value Value::list(std::vector<Value> items, bool is_tuple) {
  auto storage = std::make_shared<ListStorage>();
  storage->items = std::move(items);
  storage->is_tuple = is_tuple;
  return Value(Data(std::shared_ptr<const ListStorage>(std::move(storage))));
}

Value Value::dict(DictStorage storage) {
  return Value(Data(std::shared_ptr<const DictStorage>(std::make_shared<DictStorage>(std::move(storage)))));
}

Value Value::make_namespace(DictStorage storage) {
  return Value(Data(NamespaceTag{std::make_shared<DictStorage>(std::move(storage))}));
}

Value Value::callable(std::string name, std::function<Value(Evaluator&, CallArguments&, int)> function) {
  auto storage = std::make_shared<const CallableStorage>(CallableStorage{std::move(name), std::move(function)});
  return Value(Data(std::shared_ptr<const CallableStorage>(std::move(storage))));
}

Value Value::loop(std::shared_ptr<LoopStorage> loop) { return Value(Data(std::move(loop))); }

Value Value::from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      auto value = json.get<uint64_t>();
      if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail_user("chat template input: the integer {} is too large (the limit is 2^63-1)", value);
      return Value(static_cast<int64_t>(value));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json(item));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      DictStorage storage;
      storage.entries.reserve(json.size());
      for (const auto& [key, item] : json.items()) storage.entries.emplace_back(key, from_json(item));
      return dict(std::move(storage));
    }
    default:
      fail_user("chat template input: binary JSON values are not supported");
  }
}

const std::string& Value::undefined_hint() const { return *std::get<UndefinedTag>(data_).hint; }

double Value::to_double() const {
  switch (kind()) {
    case Kind::kBool:
      return as_bool() ? 1.0 : 0.0;
    case Kind::kInt:
      return static_cast<double>(as_int());
    case Kind::kFloat:
      return as_float();
    default:
      return 0.0;
  }
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_float() != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return !as_list().items.empty();
    case Kind::kDict:
      return !as_dict().entries.empty();
    default:
      return true;
  }
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string scientific(buffer, result.ptr);
  // scientific is "-d.ddde+XX": split sign, digits and exponent.
  bool negative = scientific[0] == '-';
  if (negative) scientific.erase(0, 1);
  size_t e_position = scientific.find('e');
  std::string mantissa = scientific.substr(0, e_position);
  int exponent = std::stoi(scientific.substr(e_position + 1));
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits.push_back(c);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      std::string integer_part = digits.substr(0, std::min(digits.size(), static_cast<size_t>(exponent) + 1));
      integer_part.append(static_cast<size_t>(exponent) + 1 - integer_part.size(), '0');
      std::string fraction = digits.size() > static_cast<size_t>(exponent) + 1
                                 ? digits.substr(static_cast<size_t>(exponent) + 1)
                                 : std::string("0");
      out += integer_part + "." + fraction;
    } else {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1);
  }
  out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

namespace {

bool is_printable(char32_t c) {
  if (c == U' ') return true;
  int8_t type = u_charType(static_cast<UChar32>(c));
  switch (type) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

std::string string_repr(const std::string& text) {
  char quote = (text.find('\'') != std::string::npos && text.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(text)) {
    if (c == U'\\') {
      out += "\\\\";
    } else if (c == static_cast<char32_t>(quote)) {
      out += '\\';
      out += quote;
    } else if (c == U'\n') {
      out += "\\n";
    } else if (c == U'\r') {
      out += "\\r";
    } else if (c == U'\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
    } else if (c < 0x80 || is_printable(c)) {
      out += utf8_encode(std::u32string_view(&c, 1));
    } else if (c <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
    } else if (c <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<uint32_t>(c));
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string Value::str() const {
  switch (kind()) {
    case Kind::kUndefined:
      return {};
    case Kind::kString:
      return as_string();
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return as_bool() ? "True" : "False";
    case Kind::kInt:
      return std::to_string(as_int());
    case Kind::kFloat:
      return python_float_repr(as_float());
    case Kind::kString:
      return string_repr(as_string());
    case Kind::kList: {
      const auto& list = as_list();
      std::string out = list.is_tuple ? "(" : "[";
      for (size_t i = 0; i < list.items.size(); ++i) {
        if (i) out += ", ";
        out += list.items[i].repr();
      }
      if (list.is_tuple && list.items.size() == 1) out += ",";
      out += list.is_tuple ? ")" : "]";
      return out;
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      const auto& entries = kind() == Kind::kDict ? as_dict().entries : namespace_attributes().entries;
      std::string out = "{";
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += ", ";
        out += string_repr(entries[i].first) + ": " + entries[i].second.repr();
      }
      out += "}";
      return kind() == Kind::kDict ? out : "<Namespace " + out + ">";
    }
    case Kind::kCallable:
      return fmt::format("<function {}>", as_callable().name);
    case Kind::kLoop:
      return fmt::format("<LoopContext {}/{}>", as_loop().index0 + 1, as_loop().items->size());
  }
  return {};
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return as_list().is_tuple ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
    case Kind::kLoop:
      return "LoopContext";
  }
  return {};
}

bool values_equal(const Value& left, const Value& right) {
  using Kind = Value::Kind;
  if (left.is_number() && right.is_number()) {
    if (left.kind() != Kind::kFloat && right.kind() != Kind::kFloat) {
      auto as_integer = [](const Value& v) { return v.kind() == Kind::kBool ? int64_t{v.as_bool()} : v.as_int(); };
      return as_integer(left) == as_integer(right);
    }
    return left.to_double() == right.to_double();
  }
  if (left.kind() != right.kind()) return false;
  switch (left.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return left.as_string() == right.as_string();
    case Kind::kList: {
      const auto& a = left.as_list();
      const auto& b = right.as_list();
      if (a.is_tuple != b.is_tuple || a.items.size() != b.items.size()) return false;
      for (size_t i = 0; i < a.items.size(); ++i)
        if (!values_equal(a.items[i], b.items[i])) return false;
      return true;
    }
    case Kind::kDict: {
      const auto& a = left.as_dict();
      const auto& b = right.as_dict();
      if (a.entries.size() != b.entries.size()) return false;
      for (const auto& [key, value] : a.entries) {
        const Value* other = b.find(key);
        if (!other || !values_equal(value, *other)) return false;
      }
      return true;
    }
    case Kind::kNamespace:
      return &left.namespace_attributes() == &right.namespace_attributes();
    case Kind::kCallable:
      return &left.as_callable() == &right.as_callable();
    case Kind::kLoop:
      return &left.as_loop() == &right.as_loop();
    default:
      return false;
  }
}

std::optional<bool> value_less(const Value& left, const Value& right) {
  if (left.is_number() && right.is_number()) {
    if (left.kind() == Value::Kind::kFloat || right.kind() == Value::Kind::kFloat)
      return left.to_double() < right.to_double();
    auto as_integer = [](const Value& v) {
      return v.kind() == Value::Kind::kBool ? int64_t{v.as_bool()} : v.as_int();
    };
    return as_integer(left) < as_integer(right);
  }
  if (left.is_string() && right.is_string()) return left.as_string() < right.as_string();
  if (left.is_list() && right.is_list() && left.as_list().is_tuple == right.as_list().is_tuple) {
    const auto& a = left.as_list().items;
    const auto& b = right.as_list().items;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      if (values_equal(a[i], b[i])) continue;
      return value_less(a[i], b[i]);
    }
    return a.size() < b.size();
  }
  return std::nullopt;
}

namespace {

void append_json_string(std::string& out, const std::string& text, bool ensure_ascii) {
  out += '"';
  for (char32_t c : utf8_decode(text)) {
    switch (c) {
      case U'"':
        out += "\\\"";
        break;
      case U'\\':
        out += "\\\\";
        break;
      case U'\n':
        out += "\\n";
        break;
      case U'\r':
        out += "\\r";
        break;
      case U'\t':
        out += "\\t";
        break;
      case U'\b':
        out += "\\b";
        break;
      case U'\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
        } else if (ensure_ascii && c >= 0x80) {
          if (c >= 0x10000) {
            uint32_t v = static_cast<uint32_t>(c) - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
          } else {
            out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
          }
        } else {
          out += utf8_encode(std::u32string_view(&c, 1));
        }
    }
  }
  out += '"';
}

struct JsonWriter {
  const JsonDumpOptions& options;
  const std::function<void(const std::string&)>& fail;
  std::string item_separator;
  std::string key_separator;
  std::string out;

  void newline(int depth) {
    out += '\n';
    for (int i = 0; i < depth; ++i) out += *options.indent;
  }

  void write(const Value& value, int depth) {
    using Kind = Value::Kind;
    switch (value.kind()) {
      case Kind::kNone:
        out += "null";
        return;
      case Kind::kBool:
        out += value.as_bool() ? "true" : "false";
        return;
      case Kind::kInt:
        out += std::to_string(value.as_int());
        return;
      case Kind::kFloat: {
        double number = value.as_float();
        if (std::isnan(number))
          out += "NaN";
        else if (std::isinf(number))
          out += number > 0 ? "Infinity" : "-Infinity";
        else
          out += python_float_repr(number);
        return;
      }
      case Kind::kString:
        append_json_string(out, value.as_string(), options.ensure_ascii);
        return;
      case Kind::kList: {
        const auto& items = value.as_list().items;
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_separator;
          if (options.indent) newline(depth + 1);
          write(items[i], depth + 1);
        }
        if (options.indent) newline(depth);
        out += ']';
        return;
      }
      case Kind::kDict: {
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& entry : value.as_dict().entries) entries.push_back(&entry);
        if (entries.empty()) {
          out += "{}";
          return;
        }
        if (options.sort_keys)
          std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
        out += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out += item_separator;
          if (options.indent) newline(depth + 1);
          append_json_string(out, entries[i]->first, options.ensure_ascii);
          out += key_separator;
          write(entries[i]->second, depth + 1);
        }
        if (options.indent) newline(depth);
        out += '}';
        return;
      }
      default:
        fail(fmt::format("Object of type {} is not JSON serializable", value.type_name()));
    }
  }
};

}  // namespace

std::string python_json_dumps(const Value& value, const JsonDumpOptions& options,
                              const std::function<void(const std::string&)>& fail) {
  JsonWriter writer{options, fail, options.indent ? "," : ", ", ": ", {}};
  if (options.separators) {
    writer.item_separator = options.separators->first;
    writer.key_separator = options.separators->second;
  }
  writer.write(value, 0);
  return std::move(writer.out);
}

}  // namespace surogate::chat_template
