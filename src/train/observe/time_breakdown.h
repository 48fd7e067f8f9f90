// debug_time_breakdown's tally: the per-op times of each step's last micro-batch (the device's
// CUDA events; train/device/training_device.h), summed over the run, then reported as the mean
// per micro-batch, largest first — a table for the terminal and a "time_breakdown" log record.
// Only the plan's steps (forward, backward, recompute) are timed, not the gradient accumulation
// and optimizer kernels around them. A second tally (host_phases) holds the host's wall seconds
// of each step's phases (reading the micro-batches, binding their inputs, enqueueing them, waiting
// for the measure, the update): the time the GPU can spend idle between the kernels.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace surogate::train {

class TimeBreakdown {
public:
  // One micro-batch's milliseconds per "phase:op" (nothing when empty).
  void add(const std::vector<std::pair<std::string, double>>& breakdown);
  bool empty() const { return samples_ == 0; }
  nlohmann::json record() const;
  // `title`: the table's heading (the mean is over `samples` adds, named `unit`).
  std::string table(std::string_view title, std::string_view unit) const;
  std::string table() const;

private:
  std::vector<std::pair<std::string, double>> mean() const;  // largest first

  std::map<std::string, double> milliseconds_;
  int64_t samples_ = 0;
};

}  // namespace surogate::train
