// See folder_lock.h.
#include "io/folder_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace surogate::io {
namespace fs = std::filesystem;
namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown host";
  return name;
}

// This process's command line, arguments joined by spaces ("surogate sft run.yaml").
std::string command_line() {
  const int fd = ::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "?";
  std::string text(4096, '\0');
  const ssize_t count = ::read(fd, text.data(), text.size());
  ::close(fd);
  if (count <= 0) return "?";
  text.resize(static_cast<size_t>(count));
  while (!text.empty() && text.back() == '\0') text.pop_back();
  for (char& c : text) if (c == '\0') c = ' ';
  return text;
}

std::string now_text() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

nlohmann::json read_record(int fd) {
  std::string text;
  char buffer[4096];
  ssize_t count;
  ::lseek(fd, 0, SEEK_SET);
  while ((count = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<size_t>(count));
  nlohmann::json record = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return record.is_object() ? record : nlohmann::json::object();
}

void write_record(int fd, std::string_view command) {
  const std::string text = nlohmann::json{{"pid", ::getpid()}, {"host", host_name()}, {"started", now_text()},
                                          {"command", std::string(command)}}
                               .dump() + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    // The lock holds without the record; only the next run's message loses the holder's details.
    return;
  }
}

std::string describe_holder(const nlohmann::json& record) {
  if (!record.contains("pid")) return "a process that has not yet written its details";
  return fmt::format("pid {} on {}, started {} ({})", record["pid"].dump(), record.value("host", "?"),
                     record.value("started", "?"), record.value("command", "?"));
}

[[noreturn]] void fail_held(const fs::path& folder, std::string_view option, const nlohmann::json& record,
                            std::string_view extra) {
  fail_user("{} '{}' is in use by another Surogate run: {}. Two runs in one folder would mix their logs, delete each "
            "other's checkpoints and overwrite each other's model. Wait for that run to finish, stop it, or choose "
            "another {}{}",
            option, folder.string(), describe_holder(record), option, extra);
}

// Whether the process the record names is alive on this machine (kill(pid, 0) reaches it, or it
// exists and belongs to another user).
bool holder_alive(const nlohmann::json& record) {
  if (!record.contains("pid") || !record["pid"].is_number_integer()) return false;
  const auto pid = record["pid"].get<pid_t>();
  if (pid <= 0) return false;
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace

FolderLock FolderLock::acquire(const fs::path& folder, std::string_view option) {
  const std::string command = command_line();
  std::error_code error;
  if (fs::exists(folder, error) && !fs::is_directory(folder, error)) {
    fail_user("{} '{}' is a file; {} must be a folder (it is created when missing)", option, folder.string(), option);
  }
  fs::create_directories(folder, error);
  if (error) {
    fail_user("{} '{}': cannot create the folder ({}); choose a writable folder", option, folder.string(),
              error.message());
  }
  const fs::path file = folder / kFolderLockFile;
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    fail_user("{} '{}': cannot create the lock file {}: {}; the folder must be writable", option, folder.string(),
              file.string(), std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    write_record(fd, command);
    return FolderLock(fd, file, false);
  }
  const int flock_error = errno;
  const nlohmann::json record = read_record(fd);
  if (flock_error == EWOULDBLOCK) {
    ::close(fd);
    fail_held(folder, option, record, "");
  }
  if (flock_error != ENOLCK && flock_error != EOPNOTSUPP && flock_error != EINVAL) {
    ::close(fd);
    fail_user("{} '{}': cannot lock {}: {}", option, folder.string(), file.string(), std::strerror(flock_error));
  }
  // No flock on this filesystem: the record is the lock.
  if (record.contains("pid")) {
    if (record.value("host", "") != host_name()) {
      ::close(fd);
      fail_held(folder, option, record,
                fmt::format(". (This filesystem has no locks, so a run on another machine cannot be checked: if that "
                            "run is over, delete {})", file.string()));
    }
    if (holder_alive(record) && record["pid"].get<pid_t>() != ::getpid()) {
      ::close(fd);
      fail_held(folder, option, record, "");
    }
  }
  write_record(fd, command);  // free, or stale: its process is gone
  return FolderLock(fd, file, true);
}

FolderLock::FolderLock(FolderLock&& other) noexcept
    : fd_(other.fd_), file_(std::move(other.file_)), record_only_(other.record_only_) {
  other.fd_ = -1;
}

FolderLock::~FolderLock() {
  if (fd_ < 0) return;
  // With flock the file stays (unlinking a locked file lets a third run lock a new inode while a
  // second still waits on the old one); closing releases the lock.
  if (record_only_) ::unlink(file_.c_str());
  ::close(fd_);
}

}  // namespace surogate::io
