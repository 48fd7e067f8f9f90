// `log_gpu_util: N`: every N optimizer steps one "gpu" record (utilisation, memory, power, clocks
// of each GPU of the run) goes to the JSONL log (and from there to the trackers), is kept in the
// training state for the HTML report's plots, and is summarised in the end-of-run table.
//
// The samples come from a cuda::GpuSampler (NVML on a real GPU, a fake in tests). Whether a run
// samples at all is decided once, by gpu_utilization_plan(): 0 turns it off; the CPU backend has
// no GPU to sample (a warning only when the option was set explicitly, since the default 100
// applies to every run); a CUDA run whose NVML cannot be opened warns once and trains on.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda/nvml_sampler.h"
#include "train/observe/html_report.h"

namespace surogate::train {

// The "gpu" record of `step`: {"step", "gpus": [{"index", "utilization_percent",
// "memory_utilization_percent", "memory_used_bytes", "memory_total_bytes", "power_watts",
// "sm_clock_mhz", "memory_clock_mhz", "temperature_celsius"}]} (a value NVML lacks is left out).
nlohmann::json gpu_record(int64_t step, const std::vector<cuda::GpuSample>& samples);

// Rows for the summary table from the run's "gpu" records: mean / max utilisation, peak memory,
// mean power and mean SM clock, per GPU. Empty when there are none.
std::vector<std::pair<std::string, std::string>> gpu_summary_rows(const nlohmann::json& gpu_history);

// The HTML report's GPU plots (utilisation %, memory used GiB, power W, clocks MHz), one series
// per GPU (and per clock); empty when there are no records.
std::vector<std::pair<std::string, std::vector<Series>>> gpu_plot_series(const nlohmann::json& gpu_history);

// Samples every `interval` steps.
class GpuUtilizationLog {
 public:
  GpuUtilizationLog(std::unique_ptr<cuda::GpuSampler> sampler, int64_t interval);
  bool due(int64_t step) const { return interval_ > 0 && step % interval_ == 0; }
  nlohmann::json sample(int64_t step);

 private:
  std::unique_ptr<cuda::GpuSampler> sampler_;
  int64_t interval_;
};

struct GpuUtilizationPlan {
  std::unique_ptr<GpuUtilizationLog> log;  // null: no sampling
  std::optional<std::string> warning;      // one line for the user, when sampling was wanted but is off
};

// `interval` = log_gpu_util, `source` = Config::source_of("log_gpu_util") ("the default" when the
// user did not write it), `gpus` = the run's CUDA devices (0 on the CPU backend). `open` makes the
// sampler (cuda::open_nvml_sampler in the trainer).
using OpenSampler = std::unique_ptr<cuda::GpuSampler> (*)(int gpus, std::string& why_not);
GpuUtilizationPlan gpu_utilization_plan(int64_t interval, const std::string& source, int gpus, OpenSampler open);

}  // namespace surogate::train
