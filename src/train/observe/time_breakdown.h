// debug_time_breakdown's tally: the per-op times of each step's last micro-batch (the device's
// CUDA events; train/device/training_device.h), summed over the run, then reported as the mean
// per micro-batch, largest first — a table for the terminal and a "time_breakdown" log record.
// The process's first step is its warm-up (cuBLASLt's first calls on each shape, the kernels'
// lazily loaded modules: 0.1–0.2 s of a Qwen3-8B step at 32k tokens, nearly all of it in the
// first products): it is kept apart and left out of the mean once a later step was added, and
// reported alone (said so) when it is the only one.
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
  // One micro-batch's milliseconds per "phase:op" (nothing when empty); the first add is the
  // warm-up.
  void add(const std::vector<std::pair<std::string, double>>& breakdown);
  bool empty() const { return !has_warm_up_; }
  nlohmann::json record() const;
  // `title`: the table's heading, followed by what the mean is over; values in `unit`.
  std::string table(std::string_view title, std::string_view unit) const;
  std::string table() const;

private:
  std::vector<std::pair<std::string, double>> mean() const;  // largest first
  std::string averaged_over() const;                         // "3 steps after the first, its warm-up left out"

  std::map<std::string, double> warm_up_;
  bool has_warm_up_ = false;
  std::map<std::string, double> milliseconds_;  // the adds after the warm-up, summed
  int64_t samples_ = 0;
};

}  // namespace surogate::train
