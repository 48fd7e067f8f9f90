// The run's JSONL log: one JSON object per line, flushed as it is written, so `tail -f` and a
// crashed run both show every finished step. Lines carry "type": "config" | "step" | "eval" |
// "summary" | "error" | "gpu" | .... Observers (the Python package's callback, the report_to
// trackers) see every record as written, with its "type" and "time". The file is held under an
// exclusive flock while open, and each record reaches it in one append: a second process that
// opens the same log_file is refused with a message naming the file, so two runs can never
// interleave into one log (a supervised run's attempts open it one after the other).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace surogate::train {

class MetricsLog {
public:
  using Observer = std::function<void(const std::string& type, const nlohmann::json& record)>;
  // Creates the parent folder; appends when the file exists (a resumed run with the same log_file).
  explicit MetricsLog(std::filesystem::path path, Observer observer = {});
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void write(const std::string& type, nlohmann::json record);
  const std::filesystem::path& path() const { return path_; }
  void add_observer(Observer observer) { observers_.push_back(std::move(observer)); }

private:
  std::filesystem::path path_;
  int fd_ = -1;  // O_APPEND, flock'ed
  std::vector<Observer> observers_;
};

// {output_dir}/log-{run_name}-{YYYYmmdd-HHMMSS}.jsonl, or the configured log_file.
std::filesystem::path default_log_path(const std::string& output_dir, const std::string& run_name);

}  // namespace surogate::train
