// A run's log, trackers and GPU sampling; see run_records.h.
#include "train/observe/run_records.h"

#include <filesystem>
#include <utility>

#include "cuda/nvml_sampler.h"

namespace surogate::train {

RunRecords open_run_records(const Config& config, const std::string& run_name, bool resumed,
                            MetricsLog::Observer on_record, int cuda_gpus,
                            const std::function<void(const std::string&)>& message) {
  RunRecords records;
  records.log =
      std::make_unique<MetricsLog>(config.logging.log_file ? std::filesystem::path(*config.logging.log_file)
                                                           : default_log_path(config.run.output_dir, run_name),
                                   std::move(on_record));
  if (!config.logging.report_to.empty()) {
    records.trackers = TrackerFeed::start(tracker_setup(config, run_name, resumed), message);
    if (TrackerFeed* feed = records.trackers.get()) {
      records.log->add_observer([feed](const std::string&, const nlohmann::json& record) { feed->send(record); });
    }
  }
  GpuUtilizationPlan gpu = gpu_utilization_plan(config.logging.log_gpu_util, config.sources.of("log_gpu_util"),
                                                cuda_gpus, cuda::open_nvml_sampler);
  records.gpu_log = std::move(gpu.log);
  if (gpu.warning) message(*gpu.warning);
  return records;
}

}  // namespace surogate::train
