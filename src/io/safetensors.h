// Reading Hugging Face safetensors files: one memory-mapped file (SafetensorsFile) or a whole
// checkpoint folder, single-file or sharded through model.safetensors.index.json
// (SafetensorsCheckpoint). Every header is validated before any tensor is handed out, so a
// tensor's byte span always lies inside the mapped file and matches shape x dtype exactly;
// bad files raise one UserError naming the file and the offending tensor / key.
// Writing lives in io/safetensors_writer.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"

namespace surogate::io {

// Largest header we accept (the format's own limit): 100 MB.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// One tensor as described by the header; offsets are relative to the data section
// (the bytes after the 8-byte length and the JSON header).
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t data_begin = 0;
  uint64_t data_end = 0;
};

// The parsed, validated header of one file. Entries are sorted by data_begin.
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;  // the "__metadata__" object (string -> string)
};

// Parses and validates a JSON header against a data section of `data_size_bytes` bytes.
// `source` names the file in error messages. Checks: valid JSON object, each entry an object
// with a known dtype, non-negative shape whose element count does not overflow,
// data_offsets == [begin, end] inside the data section, end - begin == elements x dtype size,
// no duplicate names, tensors contiguous from offset 0 to the end of the data section with no
// gaps or overlaps. Throws UserError on any violation. (Exposed for the fuzzer and tests.)
SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t data_size_bytes,
                                           const std::string& source);

// A whole file image: the 8-byte little-endian header length (checked against the file size and
// the 100 MB limit), the header (as above) and where the data section starts.
struct SafetensorsLayout {
  SafetensorsHeader header;
  uint64_t data_offset = 0;  // 8 + header length
};
SafetensorsLayout parse_safetensors_layout(std::span<const std::byte> file_bytes, const std::string& source);

// A tensor inside a mapped file: the bytes stay valid while the owning file (or checkpoint) lives.
// The span is not necessarily aligned for the element type: copy (memcpy) rather than cast.
struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;

  int64_t element_count() const;
};

class MappedFile;  // io/mapped_file.h

// One .safetensors file, memory-mapped read-only for its lifetime (move-only).
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::filesystem::path& path() const { return path_; }
  // All tensors, in file (offset) order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  // nullptr when absent.
  const SafetensorsTensor* find(std::string_view name) const;
  // Throws UserError naming the file when absent.
  const SafetensorsTensor& tensor(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  std::unique_ptr<MappedFile> mapping_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_by_name_;
  std::map<std::string, std::string> metadata_;
};

// All weights of a model folder: `model.safetensors.index.json` (sharded) or a single
// `*.safetensors` file, looked up by tensor name across shards. `open` also accepts the path of
// one .safetensors file or of an index file.
class SafetensorsCheckpoint {
 public:
  static SafetensorsCheckpoint open(const std::filesystem::path& dir_or_file);

  SafetensorsCheckpoint(SafetensorsCheckpoint&&) noexcept;
  SafetensorsCheckpoint& operator=(SafetensorsCheckpoint&&) noexcept;
  ~SafetensorsCheckpoint();

  // Sorted tensor names.
  std::vector<std::string> tensor_names() const;
  size_t tensor_count() const { return locations_.size(); }
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  const SafetensorsTensor* find(std::string_view name) const;
  // Throws UserError naming the checkpoint when absent.
  const SafetensorsTensor& tensor(std::string_view name) const;
  // The shard file holding `name` (throws like tensor()).
  const std::filesystem::path& file_of(std::string_view name) const;
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // The index's "metadata" object for sharded checkpoints (e.g. total_size), values as text;
  // the single file's __metadata__ otherwise.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Sum of all tensors' byte sizes.
  uint64_t total_size_bytes() const;

 private:
  SafetensorsCheckpoint() = default;
  std::filesystem::path source_;
  std::vector<SafetensorsFile> files_;
  std::unordered_map<std::string, std::pair<size_t, size_t>> locations_;  // name -> (file, tensor)
  std::map<std::string, std::string> metadata_;
};

// The tensor's values converted to float32 (from F32, F16, BF16 or F64). Other dtypes are a
// UserError naming the tensor. `out` must hold exactly element_count() floats.
void read_tensor_as_float32(const SafetensorsTensor& tensor, std::span<float> out);
std::vector<float> read_tensor_as_float32(const SafetensorsTensor& tensor);

}  // namespace surogate::io
