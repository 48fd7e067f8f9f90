// GPU utilisation records, summary and plots; see gpu_utilization.h.
#include "train/observe/gpu_utilization.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace surogate::train {
namespace {

constexpr const char* kDefaultSource = "the default";  // Config::source_of for an option left unset
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The values of `key` in every record's entry for GPU `index`.
std::vector<double> history_values(const nlohmann::json& gpu_history, int index, const char* key) {
  std::vector<double> values;
  for (const auto& record : gpu_history) {
    for (const auto& gpu : record.value("gpus", nlohmann::json::array())) {
      if (gpu.value("index", -1) == index && gpu.contains(key) && gpu[key].is_number()) {
        values.push_back(gpu[key].get<double>());
      }
    }
  }
  return values;
}

std::vector<int> gpu_indices(const nlohmann::json& gpu_history) {
  std::vector<int> indices;
  for (const auto& record : gpu_history) {
    for (const auto& gpu : record.value("gpus", nlohmann::json::array())) {
      const int index = gpu.value("index", -1);
      if (index >= 0 && std::find(indices.begin(), indices.end(), index) == indices.end()) indices.push_back(index);
    }
  }
  std::sort(indices.begin(), indices.end());
  return indices;
}

double mean(const std::vector<double>& values) {
  double sum = 0.0;
  for (double value : values) sum += value;
  return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

Series gpu_series(const nlohmann::json& gpu_history, int index, const char* key, const std::string& label,
                  const std::string& color, double scale) {
  Series series{label, color, {}};
  for (const auto& record : gpu_history) {
    for (const auto& gpu : record.value("gpus", nlohmann::json::array())) {
      if (gpu.value("index", -1) == index && gpu.contains(key) && gpu[key].is_number()) {
        series.points.emplace_back(record.value("step", 0.0), gpu[key].get<double>() * scale);
      }
    }
  }
  return series;
}

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f"};

}  // namespace

nlohmann::json gpu_record(int64_t step, const std::vector<cuda::GpuSample>& samples) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const cuda::GpuSample& sample : samples) {
    nlohmann::json gpu{{"index", sample.index}};
    auto put = [&](const char* key, const auto& value) {
      if (value) gpu[key] = *value;
    };
    put("utilization_percent", sample.utilization_percent);
    put("memory_utilization_percent", sample.memory_utilization_percent);
    put("memory_used_bytes", sample.memory_used_bytes);
    put("memory_total_bytes", sample.memory_total_bytes);
    put("power_watts", sample.power_watts);
    put("sm_clock_mhz", sample.sm_clock_mhz);
    put("memory_clock_mhz", sample.memory_clock_mhz);
    put("temperature_celsius", sample.temperature_celsius);
    gpus.push_back(std::move(gpu));
  }
  return {{"step", step}, {"gpus", std::move(gpus)}};
}

std::vector<std::pair<std::string, std::string>> gpu_summary_rows(const nlohmann::json& gpu_history) {
  std::vector<std::pair<std::string, std::string>> rows;
  const std::vector<int> indices = gpu_indices(gpu_history);
  for (int index : indices) {
    const std::string gpu = indices.size() == 1 ? std::string("GPU") : fmt::format("GPU {}", index);
    const std::vector<double> utilization = history_values(gpu_history, index, "utilization_percent");
    if (!utilization.empty()) {
      rows.emplace_back(gpu + " utilisation",
                        fmt::format("mean {:.0f}%, min {:.0f}%, max {:.0f}% ({} samples)", mean(utilization),
                                    *std::min_element(utilization.begin(), utilization.end()),
                                    *std::max_element(utilization.begin(), utilization.end()), utilization.size()));
    }
    const std::vector<double> used = history_values(gpu_history, index, "memory_used_bytes");
    const std::vector<double> total = history_values(gpu_history, index, "memory_total_bytes");
    if (!used.empty()) {
      rows.emplace_back(gpu + " memory used", fmt::format("peak {:.2f} GiB{}", *std::max_element(used.begin(), used.end()) / kGiB,
                                                          total.empty() ? std::string()
                                                                        : fmt::format(" of {:.2f} GiB", total.back() / kGiB)));
    }
    const std::vector<double> power = history_values(gpu_history, index, "power_watts");
    if (!power.empty()) {
      rows.emplace_back(gpu + " power", fmt::format("mean {:.0f} W, max {:.0f} W", mean(power),
                                                    *std::max_element(power.begin(), power.end())));
    }
    const std::vector<double> clock = history_values(gpu_history, index, "sm_clock_mhz");
    if (!clock.empty()) rows.emplace_back(gpu + " SM clock", fmt::format("mean {:.0f} MHz", mean(clock)));
  }
  return rows;
}

std::vector<std::pair<std::string, std::vector<Series>>> gpu_plot_series(const nlohmann::json& gpu_history) {
  const std::vector<int> indices = gpu_indices(gpu_history);
  if (indices.empty()) return {};
  std::vector<Series> utilization, memory, power, clocks;
  size_t color = 0;
  for (int index : indices) {
    const std::string gpu = fmt::format("GPU {}", index);
    const std::string first = kColors[color++ % std::size(kColors)], second = kColors[color++ % std::size(kColors)];
    // Labels are unique across the plots (they name the report's data-points series).
    utilization.push_back(gpu_series(gpu_history, index, "utilization_percent", gpu + " compute", first, 1.0));
    utilization.push_back(
        gpu_series(gpu_history, index, "memory_utilization_percent", gpu + " memory activity", second, 1.0));
    memory.push_back(gpu_series(gpu_history, index, "memory_used_bytes", gpu + " used", first, 1.0 / kGiB));
    power.push_back(gpu_series(gpu_history, index, "power_watts", gpu + " power", first, 1.0));
    clocks.push_back(gpu_series(gpu_history, index, "sm_clock_mhz", gpu + " SM clock", first, 1.0));
    clocks.push_back(gpu_series(gpu_history, index, "memory_clock_mhz", gpu + " memory clock", second, 1.0));
  }
  return {{"GPU utilisation (%)", utilization},
          {"GPU memory used (GiB)", memory},
          {"GPU power (W)", power},
          {"GPU clocks (MHz)", clocks}};
}

GpuUtilizationLog::GpuUtilizationLog(std::unique_ptr<cuda::GpuSampler> sampler, int64_t interval)
    : sampler_(std::move(sampler)), interval_(interval) {}

nlohmann::json GpuUtilizationLog::sample(int64_t step) { return gpu_record(step, sampler_->sample()); }

GpuUtilizationPlan gpu_utilization_plan(int64_t interval, const std::string& source, int gpus, OpenSampler open) {
  GpuUtilizationPlan plan;
  if (interval <= 0) return plan;
  if (gpus <= 0) {
    if (source != kDefaultSource) {
      plan.warning = fmt::format(
          "warning: {}: log_gpu_util asks for GPU utilisation every {} steps, but this run trains on the CPU "
          "backend: there is no GPU to sample, so none is logged (set log_gpu_util: 0 to silence this)",
          source, interval);
    }
    return plan;
  }
  std::string why_not;
  std::unique_ptr<cuda::GpuSampler> sampler = open(gpus, why_not);
  if (!sampler) {
    plan.warning = fmt::format("warning: log_gpu_util: GPU utilisation is not logged: {}. Training continues "
                               "(set log_gpu_util: 0 to silence this)", why_not);
    return plan;
  }
  plan.log = std::make_unique<GpuUtilizationLog>(std::move(sampler), interval);
  return plan;
}

}  // namespace surogate::train
