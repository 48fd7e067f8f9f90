// GPU utilisation, memory, power and clocks, read through NVML (`log_gpu_util`).
//
// NVML (libnvidia-ml.so.1) ships with the NVIDIA driver, not with the CUDA toolkit, so it is
// opened with dlopen when a run asks for a sample source: the build and CPU-only machines need no
// NVML, and a machine whose driver lacks it gets a reason instead of a crash. The run's GPUs are
// the CUDA devices 0..N-1; each is matched to its NVML handle by PCI bus id (NVML numbers GPUs in
// PCI order and ignores CUDA_VISIBLE_DEVICES, CUDA does not), falling back to the CUDA ordinal.
//
// GpuSampler is an interface so the recording paths (train/observe/gpu_utilization.h) are tested with a
// fake source on machines without a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace surogate::cuda {

// One GPU at one moment. A value NVML cannot give on this GPU (power on some boards) is empty.
struct GpuSample {
  int index = 0;                                   // the CUDA device ordinal of the run
  std::optional<double> utilization_percent;       // time a kernel ran over NVML's last period
  std::optional<double> memory_utilization_percent;  // time device memory was read or written
  std::optional<uint64_t> memory_used_bytes;
  std::optional<uint64_t> memory_total_bytes;
  std::optional<double> power_watts;
  std::optional<double> sm_clock_mhz;
  std::optional<double> memory_clock_mhz;
  std::optional<double> temperature_celsius;
};

class GpuSampler {
 public:
  virtual ~GpuSampler() = default;
  // One sample per GPU of the run, in device order.
  virtual std::vector<GpuSample> sample() = 0;
};

// NVML for CUDA devices 0..gpu_count-1. Null with `why_not` set when NVML cannot be loaded or
// initialised, or a device has no NVML handle.
std::unique_ptr<GpuSampler> open_nvml_sampler(int gpu_count, std::string& why_not);

}  // namespace surogate::cuda
