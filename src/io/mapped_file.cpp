// POSIX mmap of a file, read-only and private; an empty file maps to an empty span.
#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace surogate::io {

MappedFile::MappedFile(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fail_user("cannot open {}: {}; check that the file exists and is readable", path.string(),
              std::strerror(errno));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    fail_user("{} is not a regular file", path.string());
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ > 0) {
    void* address = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    ::close(fd);
    if (address == MAP_FAILED) {
      fail_user("cannot memory-map {}: {}", path.string(), std::strerror(saved));
    }
    data_ = static_cast<const std::byte*>(address);
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace surogate::io
