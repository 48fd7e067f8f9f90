#include "gguf/gguf_writer.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "io/atomic_file.h"

namespace surogate::gguf {
namespace {

enum class ValueType : uint32_t {
  UInt32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  UInt64 = 10,
};

template <typename T>
void append(std::vector<std::byte>& out, T value) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

void append_string(std::vector<std::byte>& out, const std::string& text) {
  append<uint64_t>(out, text.size());
  const auto* bytes = reinterpret_cast<const std::byte*>(text.data());
  out.insert(out.end(), bytes, bytes + text.size());
}

template <typename T>
std::vector<std::byte> scalar(ValueType type, T value) {
  std::vector<std::byte> out;
  append<uint32_t>(out, static_cast<uint32_t>(type));
  append<T>(out, value);
  return out;
}

template <typename T>
std::vector<std::byte> array(ValueType element_type, const std::vector<T>& values) {
  std::vector<std::byte> out;
  append<uint32_t>(out, static_cast<uint32_t>(ValueType::Array));
  append<uint32_t>(out, static_cast<uint32_t>(element_type));
  append<uint64_t>(out, values.size());
  for (const T& value : values) append<T>(out, value);
  return out;
}

uint64_t padded(uint64_t size) { return (size + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

void Metadata::set(const std::string& key, std::vector<std::byte> typed_value) {
  for (auto& entry : entries_) {
    if (entry.first == key) {
      entry.second = std::move(typed_value);
      return;
    }
  }
  entries_.emplace_back(key, std::move(typed_value));
}

void Metadata::set_u32(const std::string& key, uint32_t value) { set(key, scalar(ValueType::UInt32, value)); }
void Metadata::set_i32(const std::string& key, int32_t value) { set(key, scalar(ValueType::Int32, value)); }
void Metadata::set_f32(const std::string& key, float value) { set(key, scalar(ValueType::Float32, value)); }
void Metadata::set_bool(const std::string& key, bool value) {
  set(key, scalar(ValueType::Bool, static_cast<uint8_t>(value ? 1 : 0)));
}
void Metadata::set_string(const std::string& key, const std::string& value) {
  std::vector<std::byte> out;
  append<uint32_t>(out, static_cast<uint32_t>(ValueType::String));
  append_string(out, value);
  set(key, std::move(out));
}
void Metadata::set_string_array(const std::string& key, const std::vector<std::string>& values) {
  std::vector<std::byte> out;
  append<uint32_t>(out, static_cast<uint32_t>(ValueType::Array));
  append<uint32_t>(out, static_cast<uint32_t>(ValueType::String));
  append<uint64_t>(out, values.size());
  for (const std::string& value : values) append_string(out, value);
  set(key, std::move(out));
}
void Metadata::set_i32_array(const std::string& key, const std::vector<int32_t>& values) {
  set(key, array(ValueType::Int32, values));
}
void Metadata::set_f32_array(const std::string& key, const std::vector<float>& values) {
  set(key, array(ValueType::Float32, values));
}

bool Metadata::contains(const std::string& key) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const auto& entry) { return entry.first == key; });
}

std::vector<std::byte> Metadata::encode() const {
  std::vector<std::byte> out;
  for (const auto& [key, value] : entries_) {
    append_string(out, key);
    out.insert(out.end(), value.begin(), value.end());
  }
  return out;
}

int64_t tensor_elements(const TensorInfo& tensor) {
  int64_t count = 1;
  for (int64_t dim : tensor.dims) count *= dim;
  return count;
}

int64_t tensor_bytes(const TensorInfo& tensor) {
  SUROGATE_CHECK(!tensor.dims.empty(), "tensor {} has no dimensions", tensor.name);
  return row_bytes(tensor.type, tensor.dims[0]) * (tensor_elements(tensor) / tensor.dims[0]);
}

void write_gguf(const std::filesystem::path& path, const Metadata& metadata, const std::vector<TensorInfo>& tensors,
                const TensorProducer& produce) {
  std::vector<std::byte> header;
  append<uint32_t>(header, 0x46554747u);  // "GGUF" read as a little-endian u32
  append<uint32_t>(header, 3);
  append<uint64_t>(header, tensors.size());
  append<uint64_t>(header, metadata.size());
  const std::vector<std::byte> key_values = metadata.encode();
  header.insert(header.end(), key_values.begin(), key_values.end());
  uint64_t offset = 0;
  for (const TensorInfo& tensor : tensors) {
    append_string(header, tensor.name);
    append<uint32_t>(header, static_cast<uint32_t>(tensor.dims.size()));
    for (int64_t dim : tensor.dims) append<uint64_t>(header, static_cast<uint64_t>(dim));
    append<uint32_t>(header, static_cast<uint32_t>(tensor.type));
    append<uint64_t>(header, offset);
    offset += padded(static_cast<uint64_t>(tensor_bytes(tensor)));
  }
  header.resize(padded(header.size()));
  io::write_file_atomically(path, [&](const io::ByteSink& out) {
    out(header.data(), header.size());
    const std::byte zeros[kAlignment] = {};
    size_t next = 0;
    produce([&](std::span<const std::byte> bytes) {
      SUROGATE_CHECK(next < tensors.size(), "more tensors produced than the {} announced", tensors.size());
      SUROGATE_CHECK(static_cast<int64_t>(bytes.size()) == tensor_bytes(tensors[next]), "tensor {}: {} bytes, expected {}",
                     tensors[next].name, bytes.size(), tensor_bytes(tensors[next]));
      out(bytes.data(), bytes.size());
      out(zeros, padded(bytes.size()) - bytes.size());
      ++next;
    });
    SUROGATE_CHECK(next == tensors.size(), "{} tensors produced, {} announced", next, tensors.size());
  });
}

}  // namespace surogate::gguf
