// JSONL metrics log; see metrics_log.h.
#include "train/observe/metrics_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::train {

MetricsLog::MetricsLog(std::filesystem::path path, Observer observer)
    : path_(std::move(path)) {
  if (observer) observers_.push_back(std::move(observer));
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path());
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    fail_user("log_file '{}' cannot be opened for writing ({}); choose a writable path", path_.string(),
              std::strerror(errno));
  }
  // ENOLCK / EOPNOTSUPP: a filesystem without locks; the output folder's lock still applies.
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    ::close(fd_);
    fd_ = -1;
    fail_user("log_file '{}' is being written by another process (another run, or a run whose log_file is the same "
              "file); two runs in one log would interleave their records. Give each run its own log_file",
              path_.string());
  }
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::write(const std::string& type, nlohmann::json record) {
  record["type"] = type;
  record["time"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string line = record.dump() + '\n';
  // One write of the whole line (O_APPEND): the record lands whole at the end of the file.
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t count = ::write(fd_, line.data() + written, line.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      fail_user("cannot write to log_file '{}' ({}); check free disk space", path_.string(), std::strerror(errno));
    }
    written += static_cast<size_t>(count);
  }
  for (const Observer& observer : observers_) observer(type, record);
}

std::filesystem::path default_log_path(const std::string& output_dir, const std::string& run_name) {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return std::filesystem::path(output_dir) / fmt::format("log-{}-{}.jsonl", run_name, stamp);
}

}  // namespace surogate::train
