// JSONL metrics log; see metrics_log.h.
#include "train/metrics_log.h"

#include <chrono>
#include <ctime>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::train {

MetricsLog::MetricsLog(std::filesystem::path path, Observer observer)
    : path_(std::move(path)) {
  if (observer) observers_.push_back(std::move(observer));
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path());
  stream_.open(path_, std::ios::app);
  if (!stream_) fail_user("log_file '{}' cannot be opened for writing; choose a writable path", path_.string());
}

void MetricsLog::write(const std::string& type, nlohmann::json record) {
  record["type"] = type;
  record["time"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  stream_ << record.dump() << '\n';
  stream_.flush();
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
