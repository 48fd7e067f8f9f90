// Error checking for the CUDA runtime and cuBLASLt. Every call into either library goes through
// CUDA_CHECK / CUBLAS_CHECK, which throw a CudaError naming the failed expression, the file and
// line, and the library's own error string. Kernel launches are followed by CUDA_CHECK_LAUNCH().
// Kept free of fmt so that .cu files include it without pulling host-only headers into nvcc.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace surogate::cuda {

class CudaError : public std::runtime_error {
public:
  explicit CudaError(const std::string& message) : std::runtime_error(message) {}
};

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* expression, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expression, const char* file, int line);
[[noreturn]] void throw_cuda_usage_error(const char* message, const char* file, int line);

}  // namespace surogate::cuda

#define CUDA_CHECK(expression)                                                              \
  do {                                                                                      \
    cudaError_t surogate_cuda_error_ = (expression);                                        \
    if (surogate_cuda_error_ != cudaSuccess)                                                \
      ::surogate::cuda::throw_cuda_error(surogate_cuda_error_, #expression, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: catches bad launch configurations (and, asynchronously, earlier faults).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(expression)                                                              \
  do {                                                                                        \
    cublasStatus_t surogate_cublas_status_ = (expression);                                    \
    if (surogate_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                     \
      ::surogate::cuda::throw_cublas_error(surogate_cublas_status_, #expression, __FILE__, __LINE__); \
  } while (0)

// Argument checks in kernel launchers (shapes the kernels cannot handle): a bug in the caller.
#define CUDA_REQUIRE(condition, message)                                                   \
  do {                                                                                     \
    if (!(condition)) ::surogate::cuda::throw_cuda_usage_error(message, __FILE__, __LINE__); \
  } while (0)
