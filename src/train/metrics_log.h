// The run's JSONL log: one JSON object per line, flushed as it is written, so `tail -f` and a
// crashed run both show every finished step. Lines carry "type": "config" | "step" | "eval" |
// "summary" | "error" | "gpu" | .... Observers (the Python package's callback, the report_to
// trackers) see every record as written, with its "type" and "time".
#pragma once

#include <filesystem>
#include <fstream>
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
  void write(const std::string& type, nlohmann::json record);
  const std::filesystem::path& path() const { return path_; }
  void add_observer(Observer observer) { observers_.push_back(std::move(observer)); }

private:
  std::filesystem::path path_;
  std::ofstream stream_;
  std::vector<Observer> observers_;
};

// {output_dir}/log-{run_name}-{YYYYmmdd-HHMMSS}.jsonl, or the configured log_file.
std::filesystem::path default_log_path(const std::string& output_dir, const std::string& run_name);

}  // namespace surogate::train
