// log_gpu_util's recording paths with a fake GPU source (no GPU or NVML needed): which runs
// sample and which warn, the "gpu" records, the summary rows, the HTML report's plots with their
// exact values, and NVML's absence on this machine reported as a reason rather than a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "train/observe/gpu_utilization.h"
#include "train/observe/html_report.h"

namespace surogate::train {
namespace {

// Two GPUs; utilisation rises by 10 points per call, memory by 1 GiB.
class FakeSampler final : public cuda::GpuSampler {
 public:
  std::vector<cuda::GpuSample> sample() override {
    ++calls;
    std::vector<cuda::GpuSample> samples;
    for (int index = 0; index < 2; ++index) {
      cuda::GpuSample sample;
      sample.index = index;
      sample.utilization_percent = 10.0 * calls + index;
      sample.memory_utilization_percent = 5.0 * calls;
      sample.memory_used_bytes = static_cast<uint64_t>(calls) << 30;
      sample.memory_total_bytes = uint64_t{80} << 30;
      if (index == 0) sample.power_watts = 300.5;  // the second GPU's board reports no power
      sample.sm_clock_mhz = 1980;
      sample.memory_clock_mhz = 2619;
      sample.temperature_celsius = 55;
      samples.push_back(sample);
    }
    return samples;
  }
  int calls = 0;
};

int opened_gpus = -1;
std::unique_ptr<cuda::GpuSampler> open_fake(int gpus, std::string&) {
  opened_gpus = gpus;
  return std::make_unique<FakeSampler>();
}
std::unique_ptr<cuda::GpuSampler> open_missing(int, std::string& why_not) {
  why_not = "NVML (libnvidia-ml.so.1, part of the NVIDIA driver) cannot be loaded: not found";
  return nullptr;
}

TEST(GpuUtilization, PlanSamplesCudaRunsAndWarnsOnlyWhenSamplingWasAskedForAndImpossible) {
  opened_gpus = -1;
  GpuUtilizationPlan cuda_run = gpu_utilization_plan(100, "the default", 2, open_fake);
  ASSERT_TRUE(cuda_run.log);
  EXPECT_FALSE(cuda_run.warning);
  EXPECT_EQ(opened_gpus, 2);
  EXPECT_FALSE(cuda_run.log->due(99));
  EXPECT_TRUE(cuda_run.log->due(100));
  EXPECT_TRUE(cuda_run.log->due(200));

  // 0 turns it off without opening anything.
  opened_gpus = -1;
  GpuUtilizationPlan off = gpu_utilization_plan(0, "config.yaml:3", 1, open_fake);
  EXPECT_FALSE(off.log);
  EXPECT_FALSE(off.warning);
  EXPECT_EQ(opened_gpus, -1);

  // The CPU backend: silent with the default, one warning naming where the option was set.
  EXPECT_FALSE(gpu_utilization_plan(100, "the default", 0, open_fake).warning);
  GpuUtilizationPlan cpu = gpu_utilization_plan(5, "config.yaml:7", 0, open_fake);
  EXPECT_FALSE(cpu.log);
  ASSERT_TRUE(cpu.warning);
  EXPECT_NE(cpu.warning->find("config.yaml:7"), std::string::npos) << *cpu.warning;
  EXPECT_NE(cpu.warning->find("CPU backend"), std::string::npos) << *cpu.warning;
  EXPECT_NE(cpu.warning->find("every 5 steps"), std::string::npos) << *cpu.warning;

  // A GPU run whose NVML is missing: one warning with the reason, training goes on.
  GpuUtilizationPlan missing = gpu_utilization_plan(100, "the default", 1, open_missing);
  EXPECT_FALSE(missing.log);
  ASSERT_TRUE(missing.warning);
  EXPECT_NE(missing.warning->find("libnvidia-ml.so.1"), std::string::npos) << *missing.warning;
  EXPECT_NE(missing.warning->find("log_gpu_util"), std::string::npos) << *missing.warning;
}

TEST(GpuUtilization, RecordsCarryEveryValuePerGpuAndLeaveOutWhatNvmlLacks) {
  GpuUtilizationLog log(std::make_unique<FakeSampler>(), 10);
  nlohmann::json record = log.sample(10);
  EXPECT_EQ(record["step"], 10);
  ASSERT_EQ(record["gpus"].size(), 2u);
  const nlohmann::json& first = record["gpus"][0];
  EXPECT_EQ(first["index"], 0);
  EXPECT_EQ(first["utilization_percent"], 10.0);
  EXPECT_EQ(first["memory_utilization_percent"], 5.0);
  EXPECT_EQ(first["memory_used_bytes"], uint64_t{1} << 30);
  EXPECT_EQ(first["memory_total_bytes"], uint64_t{80} << 30);
  EXPECT_EQ(first["power_watts"], 300.5);
  EXPECT_EQ(first["sm_clock_mhz"], 1980.0);
  EXPECT_EQ(first["memory_clock_mhz"], 2619.0);
  EXPECT_EQ(first["temperature_celsius"], 55.0);
  EXPECT_EQ(record["gpus"][1]["utilization_percent"], 11.0);
  EXPECT_FALSE(record["gpus"][1].contains("power_watts"));
}

TEST(GpuUtilization, SummaryRowsGiveMeanMinMaxUtilisationPeakMemoryPowerAndClock) {
  GpuUtilizationLog log(std::make_unique<FakeSampler>(), 10);
  nlohmann::json history = nlohmann::json::array({log.sample(10), log.sample(20), log.sample(30)});
  std::vector<std::pair<std::string, std::string>> rows = gpu_summary_rows(history);
  auto row = [&](const std::string& key) {
    for (const auto& [name, value] : rows) {
      if (name == key) return value;
    }
    return std::string("<missing " + key + ">");
  };
  // GPU 0: 10, 20, 30 %; GPU 1: 11, 21, 31 %.
  EXPECT_EQ(row("GPU 0 utilisation"), "mean 20%, min 10%, max 30% (3 samples)");
  EXPECT_EQ(row("GPU 1 utilisation"), "mean 21%, min 11%, max 31% (3 samples)");
  EXPECT_EQ(row("GPU 0 memory used"), "peak 3.00 GiB of 80.00 GiB");
  EXPECT_EQ(row("GPU 0 power"), "mean 300 W, max 300 W");  // 300.5 rounds to even
  EXPECT_EQ(row("GPU 1 power"), "<missing GPU 1 power>");
  EXPECT_EQ(row("GPU 0 SM clock"), "mean 1980 MHz");
  EXPECT_TRUE(gpu_summary_rows(nlohmann::json::array()).empty());
}

TEST(GpuUtilization, HtmlReportPlotsTheSamplesWithTheirExactValues) {
  GpuUtilizationLog log(std::make_unique<FakeSampler>(), 10);
  nlohmann::json gpu_history = nlohmann::json::array({log.sample(10), log.sample(20)});
  nlohmann::json history = nlohmann::json::array({{{"step", 1}, {"loss", 2.5}, {"lr", 1e-4}, {"grad_norm", 0.75}},
                                                   {{"step", 2}, {"loss", 2.25}, {"lr", 2e-4}, {"grad_norm", 0.5}}});
  const auto plots = gpu_plot_series(gpu_history);
  ASSERT_EQ(plots.size(), 4u);
  EXPECT_EQ(plots[0].first, "GPU utilisation (%)");
  const std::filesystem::path file =
      std::filesystem::path(testing::TempDir()) / ("gpu_report_" + std::to_string(::getpid()) + ".html");
  write_html_report(file, "run", history, nlohmann::json::array(), {{"steps", "2"}}, plots);
  std::ifstream stream(file);
  std::stringstream text;
  text << stream.rdbuf();
  const std::string html = text.str();
  EXPECT_NE(html.find("GPU utilisation (%)"), std::string::npos);
  EXPECT_NE(html.find("GPU power (W)"), std::string::npos);
  EXPECT_NE(html.find("data-series=\"GPU 0 power\" data-points=\"10:300.5 20:300.5\""), std::string::npos) << html;
  EXPECT_NE(html.find("data-series=\"GPU 1 memory clock\" data-points=\"10:2619 20:2619\""), std::string::npos);
  EXPECT_NE(html.find("data-series=\"GPU 0 compute\" data-points=\"10:10 20:20\""), std::string::npos) << html;
  EXPECT_NE(html.find("data-series=\"GPU 1 compute\" data-points=\"10:11 20:21\""), std::string::npos) << html;
  EXPECT_NE(html.find("data-series=\"GPU 0 used\" data-points=\"10:1 20:2\""), std::string::npos) << html;  // GiB
  EXPECT_NE(html.find("data-series=\"train loss\" data-points=\"1:2.5 2:2.25\""), std::string::npos) << html;
  EXPECT_NE(html.find("data-series=\"learning rate\" data-points=\"1:0.0001 2:0.0002\""), std::string::npos) << html;
  std::filesystem::remove(file);
}

TEST(GpuUtilization, NvmlAbsenceIsAReasonNotACrash) {
  // This machine (CI) has no NVIDIA driver; on a GPU machine NVML opens and samples.
  std::string why_not;
  std::unique_ptr<cuda::GpuSampler> sampler = cuda::open_nvml_sampler(1, why_not);
  if (sampler) {
    std::vector<cuda::GpuSample> samples = sampler->sample();
    ASSERT_EQ(samples.size(), 1u);
    EXPECT_TRUE(samples[0].memory_total_bytes.has_value());
    EXPECT_GT(*samples[0].memory_total_bytes, 0u);
  } else {
    EXPECT_FALSE(why_not.empty());
    EXPECT_NE(why_not.find("NVML"), std::string::npos) << why_not;
  }
}

}  // namespace
}  // namespace surogate::train
