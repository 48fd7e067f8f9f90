// Thrift compact protocol decoding (see thrift_compact.h).
#include "data/parquet/thrift_compact.h"

#include <cstring>

namespace surogate::data::parquet {
namespace {
constexpr int kMaxNesting = 64;
}

uint8_t ThriftReader::read_byte() {
  if (position_ >= size_) throw ThriftError("metadata ends in the middle of a value");
  return data_[position_++];
}

uint64_t ThriftReader::read_varint() {
  uint64_t result = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    uint8_t byte = read_byte();
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return result;
  }
  throw ThriftError("varint longer than 10 bytes");
}

int64_t ThriftReader::read_zigzag() {
  uint64_t raw = read_varint();
  return static_cast<int64_t>(raw >> 1) ^ -static_cast<int64_t>(raw & 1);
}

int32_t ThriftReader::read_i32() { return static_cast<int32_t>(read_zigzag()); }
int64_t ThriftReader::read_i64() { return read_zigzag(); }

double ThriftReader::read_double() {
  if (size_ - position_ < 8) throw ThriftError("metadata ends in the middle of a double");
  double value;
  std::memcpy(&value, data_ + position_, 8);
  position_ += 8;
  return value;
}

std::string ThriftReader::read_string() {
  uint64_t length = read_varint();
  if (length > size_ - position_) throw ThriftError("string length runs past the end of the metadata");
  std::string value(reinterpret_cast<const char*>(data_ + position_), length);
  position_ += length;
  return value;
}

bool ThriftReader::read_bool(ThriftType field_type) { return field_type == ThriftType::BoolTrue; }

bool ThriftReader::read_bool_element() { return read_byte() == 1; }

void ThriftReader::read_struct(const std::function<void(int16_t, ThriftType)>& on_field) {
  if (++depth_ > kMaxNesting) throw ThriftError("metadata nested too deeply");
  int16_t last_field = 0;
  while (true) {
    uint8_t header = read_byte();
    auto type = static_cast<ThriftType>(header & 0x0f);
    if (type == ThriftType::Stop) break;
    if (static_cast<uint8_t>(type) > 12) throw ThriftError("unknown field type in metadata");
    int delta = header >> 4;
    int16_t field_id = delta != 0 ? static_cast<int16_t>(last_field + delta) : static_cast<int16_t>(read_zigzag());
    last_field = field_id;
    on_field(field_id, type);
  }
  --depth_;
}

void ThriftReader::read_list(const std::function<void(ThriftType)>& on_element) {
  uint8_t header = read_byte();
  uint64_t count = header >> 4;
  if (count == 15) count = read_varint();
  auto type = static_cast<ThriftType>(header & 0x0f);
  // Each element takes at least one byte, so a count beyond the remaining bytes is corrupt.
  if (count > size_ - position_ && type != ThriftType::BoolTrue && type != ThriftType::BoolFalse) {
    throw ThriftError("list length runs past the end of the metadata");
  }
  for (uint64_t i = 0; i < count; ++i) on_element(type);
}

void ThriftReader::skip(ThriftType type) {
  switch (type) {
    case ThriftType::BoolTrue:
    case ThriftType::BoolFalse:
      return;  // value lives in the field header
    case ThriftType::Byte:
      read_byte();
      return;
    case ThriftType::I16:
    case ThriftType::I32:
    case ThriftType::I64:
      read_varint();
      return;
    case ThriftType::Double:
      read_double();
      return;
    case ThriftType::Binary:
      read_string();
      return;
    case ThriftType::List:
    case ThriftType::Set:
      if (++depth_ > kMaxNesting) throw ThriftError("metadata nested too deeply");
      read_list([this](ThriftType element) {
        if (element == ThriftType::BoolTrue || element == ThriftType::BoolFalse) {
          read_byte();
        } else {
          skip(element);
        }
      });
      --depth_;
      return;
    case ThriftType::Map: {
      if (++depth_ > kMaxNesting) throw ThriftError("metadata nested too deeply");
      uint64_t count = read_varint();
      if (count > 0) {
        uint8_t types = read_byte();
        auto key = static_cast<ThriftType>(types >> 4);
        auto value = static_cast<ThriftType>(types & 0x0f);
        if (count > size_ - position_) throw ThriftError("map length runs past the end of the metadata");
        for (uint64_t i = 0; i < count; ++i) {
          if (key == ThriftType::BoolTrue || key == ThriftType::BoolFalse) read_byte(); else skip(key);
          if (value == ThriftType::BoolTrue || value == ThriftType::BoolFalse) read_byte(); else skip(value);
        }
      }
      --depth_;
      return;
    }
    case ThriftType::Struct:
      read_struct([this](int16_t, ThriftType field) { skip(field); });
      return;
    case ThriftType::Stop:
      break;
  }
  throw ThriftError("unexpected field type in metadata");
}

}  // namespace surogate::data::parquet
