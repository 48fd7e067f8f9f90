#include "cuda/device_info.h"

#include <dlfcn.h>

#include <fmt/format.h>

#ifdef SUROGATE_WITH_CUDA
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#endif

namespace surogate::cuda {
namespace {

// cuDNN and NCCL are looked up at run time so that `surogate info` works on machines
// where they are missing, and can say so.
template <typename Fn>
Fn find_symbol(const char* const* libraries, const char* symbol) {
  for (const char* const* library = libraries; *library; ++library) {
    if (void* handle = dlopen(*library, RTLD_LAZY | RTLD_LOCAL)) {
      if (void* address = dlsym(handle, symbol)) return reinterpret_cast<Fn>(address);
    }
  }
  return nullptr;
}

std::string cudnn_version() {
  static const char* const kLibraries[] = {"libcudnn.so.9", "libcudnn.so", nullptr};
  auto get_version = find_symbol<size_t (*)()>(kLibraries, "cudnnGetVersion");
  if (!get_version) return "";
  size_t version = get_version();  // major*10000 + minor*100 + patch for cuDNN 9
  return fmt::format("{}.{}.{}", version / 10000, (version % 10000) / 100, version % 100);
}

std::string nccl_version() {
  static const char* const kLibraries[] = {"libnccl.so.2", "libnccl.so", nullptr};
  auto get_version = find_symbol<int (*)(int*)>(kLibraries, "ncclGetVersion");
  int version = 0;
  if (!get_version || get_version(&version) != 0) return "";
  return fmt::format("{}.{}.{}", version / 10000, (version % 10000) / 100, version % 100);
}

}  // namespace

std::string format_cuda_version(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

bool cuda_device_available(std::string* reason) {
#ifdef SUROGATE_WITH_CUDA
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    if (reason) *reason = fmt::format("no usable CUDA device: {}", cudaGetErrorString(error));
    cudaGetLastError();
    return false;
  }
  if (count == 0) {
    if (reason) *reason = "no CUDA device visible";
    return false;
  }
  return true;
#else
  if (reason) *reason = "this build has no CUDA backend (configured with SUROGATE_CUDA=OFF)";
  return false;
#endif
}

CudaEnvironment query_cuda_environment() {
  CudaEnvironment env;
  env.cudnn_version = cudnn_version();
  env.nccl_version = nccl_version();
#ifdef SUROGATE_WITH_CUDA
  env.built_with_cuda = true;
  size_t cublas = cublasLtGetVersion();
  env.cublas_version = fmt::format("{}.{}.{}", cublas / 10000, (cublas % 10000) / 100, cublas % 100);
  cudaRuntimeGetVersion(&env.runtime_version);
  cudaDriverGetVersion(&env.driver_version);
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    env.status = fmt::format("no GPU visible ({})", cudaGetErrorString(error));
    cudaGetLastError();
    return env;
  }
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp props{};
    if (cudaGetDeviceProperties(&props, index) != cudaSuccess) continue;
    env.gpus.push_back(GpuInfo{index, props.name, props.totalGlobalMem, props.major, props.minor,
                               props.multiProcessorCount});
  }
  env.status = count > 0 ? "ok" : "no GPU visible";
#else
  env.status = "this build has no CUDA backend (configured with SUROGATE_CUDA=OFF)";
#endif
  return env;
}

uint64_t gpu_free_bytes(int device) {
#ifdef SUROGATE_WITH_CUDA
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    free_bytes = 0;
  }
  cudaSetDevice(previous);
  return free_bytes;
#else
  (void)device;
  return 0;
#endif
}

}  // namespace surogate::cuda
