// Where a run's records go, on the leading process: the JSONL log (`log_file`, or the default path
// in output_dir), report_to's trackers fed from every record it writes, and log_gpu_util's sampler.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "train/observe/gpu_utilization.h"
#include "train/observe/metrics_log.h"
#include "train/observe/tracker_feed.h"

namespace surogate::train {

struct RunRecords {
  std::unique_ptr<MetricsLog> log;
  std::unique_ptr<TrackerFeed> trackers;        // report_to; null when none (or none started)
  std::unique_ptr<GpuUtilizationLog> gpu_log;  // log_gpu_util; null: no sampling
};

// `resumed`: the trackers continue the run's earlier records; `cuda_gpus`: the run's GPUs (0 on the
// CPU backend); `message` prints a line for the user (a tracker that did not start, sampling off).
RunRecords open_run_records(const Config& config, const std::string& run_name, bool resumed,
                            MetricsLog::Observer on_record, int cuda_gpus,
                            const std::function<void(const std::string&)>& message);

}  // namespace surogate::train
