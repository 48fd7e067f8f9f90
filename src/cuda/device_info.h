// What the CUDA side of this machine offers: GPUs and the versions of the libraries the engine
// uses. Safe to call on a machine with no GPU or no driver: it reports that instead of failing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace surogate::cuda {

struct GpuInfo {
  int index = 0;
  std::string name;
  uint64_t memory_total_bytes = 0;
  int sm_major = 0;
  int sm_minor = 0;
  int multiprocessors = 0;
};

struct CudaEnvironment {
  bool built_with_cuda = false;
  std::string status;           // why no GPU is visible, or "ok"
  int driver_version = 0;       // e.g. 13000 for CUDA 13.0; 0 when no driver
  int runtime_version = 0;
  std::string cublas_version;   // "" when unavailable
  std::string cudnn_version;
  std::string nccl_version;
  std::vector<GpuInfo> gpus;
};

CudaEnvironment query_cuda_environment();

// True when this build has CUDA and a device can be used; otherwise `reason` (if given) says why
// not. GPU tests call this and skip with the reason on machines without a GPU.
bool cuda_device_available(std::string* reason = nullptr);

// Bytes free on GPU `device` now (creates its CUDA context); 0 when it cannot be asked.
uint64_t gpu_free_bytes(int device);

// "13.0" from 13000.
std::string format_cuda_version(int version);

}  // namespace surogate::cuda
