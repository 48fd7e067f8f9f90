// A GGUF (version 3) file writer: the little-endian layout llama.cpp's gguf.c and gguf-py read.
//   "GGUF" u32 version=3, u64 tensor count, u64 key-value count
//   key-values: string key, u32 value type, value (strings are u64 length + UTF-8 bytes; arrays are
//     u32 element type, u64 count, elements)
//   tensor infos: string name, u32 dimension count, u64 dims (ggml order: innermost first), u32 ggml
//     type, u64 offset into the data section
//   zero padding to the alignment (32, general.alignment's default, so the key is not written), then
//   each tensor's bytes, each padded to the alignment.
// Tensor data is produced one tensor at a time while the file streams out, so a model never has to
// sit in memory whole; the file appears atomically (io/atomic_file.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"

namespace surogate::gguf {

inline constexpr uint64_t kAlignment = 32;

// The key-values of a file, in insertion order; setting a key again replaces its value in place.
class Metadata {
 public:
  void set_u32(const std::string& key, uint32_t value);
  void set_i32(const std::string& key, int32_t value);
  void set_f32(const std::string& key, float value);
  void set_bool(const std::string& key, bool value);
  void set_string(const std::string& key, const std::string& value);
  void set_string_array(const std::string& key, const std::vector<std::string>& values);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& values);
  void set_f32_array(const std::string& key, const std::vector<float>& values);

  bool contains(const std::string& key) const;
  size_t size() const { return entries_.size(); }
  // The encoded key-value section.
  std::vector<std::byte> encode() const;

 private:
  void set(const std::string& key, std::vector<std::byte> typed_value);
  std::vector<std::pair<std::string, std::vector<std::byte>>> entries_;
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the row length (the HF shape reversed)
  GgmlType type = GgmlType::F32;
};
int64_t tensor_elements(const TensorInfo& tensor);
int64_t tensor_bytes(const TensorInfo& tensor);

// Receives the bytes of the next tensor (exactly tensor_bytes of them), in the order of `tensors`.
using TensorSink = std::function<void(std::span<const std::byte> bytes)>;
// Calls the sink once per tensor, in order (a push, so a loader that streams a checkpoint can drive it).
using TensorProducer = std::function<void(const TensorSink& sink)>;

void write_gguf(const std::filesystem::path& path, const Metadata& metadata, const std::vector<TensorInfo>& tensors,
                const TensorProducer& produce);

}  // namespace surogate::gguf
