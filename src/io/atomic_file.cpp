// Temporary file via mkstemp next to the target, buffered writes, fsync, rename, fsync(dir).
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/interrupt_cleanup.h"

namespace surogate::io {
namespace {

// Owns the temporary file: closes and deletes it unless committed.
class TemporaryFile {
 public:
  explicit TemporaryFile(const std::filesystem::path& target) : target_(target) {
    std::filesystem::path folder = target.parent_path().empty() ? "." : target.parent_path();
    std::error_code error;
    std::filesystem::create_directories(folder, error);
    std::string temporary_name = ".";
    temporary_name += target.filename().string();
    temporary_name += ".tmp.XXXXXX";
    std::string pattern = (folder / temporary_name).string();
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    fd_ = ::mkstemp(name.data());
    if (fd_ < 0) {
      fail_user("cannot create a temporary file in {}: {}; check the folder is writable",
                folder.string(), std::strerror(errno));
    }
    temp_path_ = name.data();
    cleanup_.emplace(temp_path_);  // Ctrl-C runs no destructor: the handler removes it then
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_path_.c_str());
  }

  void append(const void* data, size_t size) {
    const char* cursor = static_cast<const char*>(data);
    while (size > 0) {
      ssize_t written = ::write(fd_, cursor, size);
      if (written < 0) {
        if (errno == EINTR) continue;
        fail_user("cannot write {}: {}; check free disk space", target_.string(), std::strerror(errno));
      }
      cursor += written;
      size -= static_cast<size_t>(written);
    }
  }

  void commit() {
    if (::fchmod(fd_, 0644) != 0 || ::fsync(fd_) != 0) {
      fail_user("cannot flush {}: {}", target_.string(), std::strerror(errno));
    }
    ::close(fd_);
    fd_ = -1;
    if (::rename(temp_path_.c_str(), target_.c_str()) != 0) {
      fail_user("cannot move the finished file into place at {}: {}", target_.string(),
                std::strerror(errno));
    }
    committed_ = true;
    cleanup_.reset();
    std::filesystem::path folder = target_.parent_path().empty() ? "." : target_.parent_path();
    int dir_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      ::fsync(dir_fd);
      ::close(dir_fd);
    }
  }

 private:
  std::filesystem::path target_;
  std::string temp_path_;
  std::optional<InterruptCleanup> cleanup_;
  int fd_ = -1;
  bool committed_ = false;
};

// Collects small writes into large ones.
class BufferedSink {
 public:
  explicit BufferedSink(TemporaryFile& file) : file_(file) { buffer_.reserve(kBufferBytes); }
  void append(const void* data, size_t size) {
    if (size >= kBufferBytes) {
      flush();
      file_.append(data, size);
      return;
    }
    if (buffer_.size() + size > kBufferBytes) flush();
    const char* bytes = static_cast<const char*>(data);
    buffer_.insert(buffer_.end(), bytes, bytes + size);
  }
  void flush() {
    if (!buffer_.empty()) file_.append(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

 private:
  static constexpr size_t kBufferBytes = 1 << 20;
  TemporaryFile& file_;
  std::vector<char> buffer_;
};

}  // namespace

void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(const ByteSink&)>& write) {
  TemporaryFile file(path);
  BufferedSink sink(file);
  write([&](const void* data, size_t size) { sink.append(data, size); });
  sink.flush();
  file.commit();
}

void write_text_file_atomically(const std::filesystem::path& path, std::string_view content) {
  write_file_atomically(path, [&](const ByteSink& sink) { sink(content.data(), content.size()); });
}

}  // namespace surogate::io
