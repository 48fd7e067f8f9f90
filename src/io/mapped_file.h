// A read-only memory mapping of a whole file, released when the object dies (RAII).
// Used for safetensors so that multi-gigabyte weights are paged in on demand, not copied.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace surogate::io {

class MappedFile {
 public:
  // Throws UserError naming the file when it cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }

 private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace surogate::io
