// NVML through dlopen; see nvml_sampler.h. Only the handful of NVML entry points a sample needs
// are declared here, with NVML's C ABI (stable since NVML 2, the _v2 names since driver 325).
#include "cuda/nvml_sampler.h"

#include <dlfcn.h>

#include <fmt/format.h>

#ifdef SUROGATE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace surogate::cuda {
namespace {

using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr int kNvmlClockSm = 1;
constexpr int kNvmlClockMemory = 2;
constexpr int kNvmlTemperatureGpu = 0;

struct NvmlFunctions {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*handle_by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*power)(NvmlDevice, unsigned int*) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned int*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned int*) = nullptr;
};

template <typename Function>
bool bind(void* library, const char* name, Function& function) {
  function = reinterpret_cast<Function>(dlsym(library, name));
  return function != nullptr;
}

// The PCI bus id of CUDA device `device` ("0000:3B:00.0"), empty when CUDA cannot say.
std::string cuda_pci_bus_id(int device) {
#ifdef SUROGATE_WITH_CUDA
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) == cudaSuccess) return bus_id;
  cudaGetLastError();
#else
  (void)device;
#endif
  return "";
}

class NvmlSampler final : public GpuSampler {
 public:
  NvmlSampler(void* library, NvmlFunctions functions, std::vector<NvmlDevice> devices)
      : library_(library), nvml_(functions), devices_(std::move(devices)) {}
  ~NvmlSampler() override {
    nvml_.shutdown();
    dlclose(library_);
  }

  std::vector<GpuSample> sample() override {
    std::vector<GpuSample> samples;
    for (size_t index = 0; index < devices_.size(); ++index) {
      const NvmlDevice device = devices_[index];
      GpuSample sample;
      sample.index = static_cast<int>(index);
      NvmlUtilization utilization{};
      if (nvml_.utilization(device, &utilization) == 0) {
        sample.utilization_percent = utilization.gpu;
        sample.memory_utilization_percent = utilization.memory;
      }
      NvmlMemory memory{};
      if (nvml_.memory(device, &memory) == 0) {
        sample.memory_used_bytes = memory.used;
        sample.memory_total_bytes = memory.total;
      }
      unsigned int value = 0;
      if (nvml_.power(device, &value) == 0) sample.power_watts = value / 1000.0;  // milliwatts
      if (nvml_.clock(device, kNvmlClockSm, &value) == 0) sample.sm_clock_mhz = value;
      if (nvml_.clock(device, kNvmlClockMemory, &value) == 0) sample.memory_clock_mhz = value;
      if (nvml_.temperature(device, kNvmlTemperatureGpu, &value) == 0) sample.temperature_celsius = value;
      samples.push_back(sample);
    }
    return samples;
  }

 private:
  void* library_;
  NvmlFunctions nvml_;
  std::vector<NvmlDevice> devices_;
};

}  // namespace

std::unique_ptr<GpuSampler> open_nvml_sampler(int gpu_count, std::string& why_not) {
  void* library = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = dlerror();
    why_not = fmt::format("NVML (libnvidia-ml.so.1, part of the NVIDIA driver) cannot be loaded: {}",
                          error ? error : "not found");
    return nullptr;
  }
  NvmlFunctions nvml;
  const bool bound = bind(library, "nvmlInit_v2", nvml.init) && bind(library, "nvmlShutdown", nvml.shutdown) &&
                     bind(library, "nvmlErrorString", nvml.error_string) &&
                     bind(library, "nvmlDeviceGetHandleByPciBusId_v2", nvml.handle_by_pci_bus_id) &&
                     bind(library, "nvmlDeviceGetHandleByIndex_v2", nvml.handle_by_index) &&
                     bind(library, "nvmlDeviceGetUtilizationRates", nvml.utilization) &&
                     bind(library, "nvmlDeviceGetMemoryInfo", nvml.memory) &&
                     bind(library, "nvmlDeviceGetPowerUsage", nvml.power) &&
                     bind(library, "nvmlDeviceGetClockInfo", nvml.clock) &&
                     bind(library, "nvmlDeviceGetTemperature", nvml.temperature);
  if (!bound) {
    why_not = "the NVML library of this driver lacks an entry point Surogate needs (driver too old)";
    dlclose(library);
    return nullptr;
  }
  if (const NvmlReturn status = nvml.init(); status != 0) {
    why_not = fmt::format("NVML cannot be initialised: {}", nvml.error_string(status));
    dlclose(library);
    return nullptr;
  }
  std::vector<NvmlDevice> devices;
  for (int index = 0; index < gpu_count; ++index) {
    NvmlDevice device = nullptr;
    const std::string bus_id = cuda_pci_bus_id(index);
    NvmlReturn status = bus_id.empty() ? -1 : nvml.handle_by_pci_bus_id(bus_id.c_str(), &device);
    if (status != 0) status = nvml.handle_by_index(static_cast<unsigned int>(index), &device);
    if (status != 0) {
      why_not = fmt::format("NVML has no handle for GPU {} ({})", index, nvml.error_string(status));
      nvml.shutdown();
      dlclose(library);
      return nullptr;
    }
    devices.push_back(device);
  }
  return std::make_unique<NvmlSampler>(library, nvml, std::move(devices));
}

}  // namespace surogate::cuda
