// The values a chat template computes with: Python's types as Jinja sees them (undefined, None,
// bool, int, float, str, list/tuple, dict, namespace, callables and the `loop` object). Strings,
// lists and dicts are shared and immutable (Hugging Face renders in an immutable sandbox), so
// copying a Value is cheap; only a namespace is mutable. Printing, truthiness, equality and
// ordering follow Python so rendered text matches jinja2 byte for byte.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace surogate::chat_template {

class Value;

struct ListStorage {
  std::vector<Value> items;
  bool is_tuple = false;
};

// A Python dict with string keys, in insertion order (JSON objects and Jinja dict literals).
struct DictStorage {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
};

struct CallArguments;
class Evaluator;

// A function callable from a template: a macro, `caller`, or a global such as `range`.
struct CallableStorage {
  std::string name;
  std::function<Value(Evaluator&, CallArguments&, int line)> function;
};

// The `loop` variable of a for loop.
struct LoopStorage {
  const std::vector<Value>* items = nullptr;
  size_t index0 = 0;
  int depth0 = 0;
};

struct UndefinedTag {
  std::shared_ptr<const std::string> hint;  // what was missing, e.g. "'foo' is undefined"
};
struct NoneTag {};
struct NamespaceTag {
  std::shared_ptr<DictStorage> attributes;
};

class Value {
public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable, kLoop };

  Value() : data_(UndefinedTag{}) {}
  static Value undefined(std::string hint);
  static Value none() { return Value(Data(NoneTag{})); }
  Value(bool value) : data_(value) {}
  Value(int64_t value) : data_(value) {}
  Value(int value) : data_(static_cast<int64_t>(value)) {}
  Value(double value) : data_(value) {}
  Value(std::string value) : data_(std::make_shared<const std::string>(std::move(value))) {}
  Value(const char* value) : Value(std::string(value)) {}
  static Value list(std::vector<Value> items, bool is_tuple = false);
  static Value dict(DictStorage storage);
  static Value make_namespace(DictStorage storage);
  static Value callable(std::string name, std::function<Value(Evaluator&, CallArguments&, int)> function);
  static Value loop(std::shared_ptr<LoopStorage> loop);
  static Value from_json(const nlohmann::ordered_json& json);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_number() const { return kind() == Kind::kInt || kind() == Kind::kFloat || kind() == Kind::kBool; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_float() const { return std::get<double>(data_); }
  const std::string& as_string() const { return *std::get<std::shared_ptr<const std::string>>(data_); }
  const ListStorage& as_list() const { return *std::get<std::shared_ptr<const ListStorage>>(data_); }
  const DictStorage& as_dict() const { return *std::get<std::shared_ptr<const DictStorage>>(data_); }
  DictStorage& namespace_attributes() const { return *std::get<NamespaceTag>(data_).attributes; }
  const CallableStorage& as_callable() const { return *std::get<std::shared_ptr<const CallableStorage>>(data_); }
  const LoopStorage& as_loop() const { return *std::get<std::shared_ptr<LoopStorage>>(data_); }
  const std::string& undefined_hint() const;

  // An int or bool as int64; a float as double (callers check is_number first).
  double to_double() const;

  bool truthy() const;
  // Python str(value) (undefined prints as nothing).
  std::string str() const;
  // Python repr(value).
  std::string repr() const;
  // Python's type name, for error messages ("str", "list", "NoneType", ...).
  std::string type_name() const;

private:
  using Data = std::variant<UndefinedTag, NoneTag, bool, int64_t, double, std::shared_ptr<const std::string>,
                            std::shared_ptr<const ListStorage>, std::shared_ptr<const DictStorage>, NamespaceTag,
                            std::shared_ptr<const CallableStorage>, std::shared_ptr<LoopStorage>>;
  explicit Value(Data data) : data_(std::move(data)) {}
  Data data_;
};

// Python `==` (1 == 1.0 == True; undefined equals only undefined).
bool values_equal(const Value& left, const Value& right);
// Python `<` for numbers, strings and sequences; nullopt when the types cannot be ordered.
std::optional<bool> value_less(const Value& left, const Value& right);
// Python float repr: shortest text that reads back the same value ("1.0", "1e+16", "inf").
std::string python_float_repr(double value);

// Python json.dumps(value, ensure_ascii, indent, separators, sort_keys) — what Hugging Face's
// `tojson` filter calls. Throws UserError (via `fail`) for values JSON cannot hold.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: one line
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
};
std::string python_json_dumps(const Value& value, const JsonDumpOptions& options,
                              const std::function<void(const std::string&)>& fail);

}  // namespace surogate::chat_template
