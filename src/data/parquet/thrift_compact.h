// A reader for the Thrift compact protocol, the encoding of Parquet's file footer and page
// headers. It is deliberately small: callers walk a struct field by field and skip what they do
// not need, so unknown (newer) fields in a file never break reading. Every read is bounds-checked
// and a malformed buffer raises ThriftError, which the Parquet reader turns into a UserError
// naming the file.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace surogate::data::parquet {

class ThriftError : public std::runtime_error {
public:
  explicit ThriftError(const std::string& message) : std::runtime_error(message) {}
};

enum class ThriftType : uint8_t {
  Stop = 0,
  BoolTrue = 1,
  BoolFalse = 2,
  Byte = 3,
  I16 = 4,
  I32 = 5,
  I64 = 6,
  Double = 7,
  Binary = 8,
  List = 9,
  Set = 10,
  Map = 11,
  Struct = 12,
};

class ThriftReader {
public:
  ThriftReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  // Calls on_field(field_id, type) for each field of the struct at the cursor; the callback must
  // consume the field's value (with a read_* call or skip(type)).
  void read_struct(const std::function<void(int16_t, ThriftType)>& on_field);
  // Reads a list header and calls on_element(element_type) once per element.
  void read_list(const std::function<void(ThriftType)>& on_element);

  bool read_bool(ThriftType field_type);  // a bool field carries its value in its type
  bool read_bool_element();               // a bool inside a list is one byte
  int32_t read_i32();
  int64_t read_i64();
  double read_double();
  std::string read_string();
  void skip(ThriftType type);

  size_t position() const { return position_; }

private:
  uint8_t read_byte();
  uint64_t read_varint();
  int64_t read_zigzag();
  int depth_ = 0;
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
};

}  // namespace surogate::data::parquet
