// Formats and throws the errors raised by the CUDA_CHECK family of macros (cuda_check.h).
#include "cuda/cuda_check.h"

#include <fmt/format.h>

namespace surogate::cuda {

void throw_cuda_error(cudaError_t error, const char* expression, const char* file, int line) {
  throw CudaError(fmt::format("{}:{}: CUDA error {} ({}): {} in `{}`", file, line, static_cast<int>(error),
                              cudaGetErrorName(error), cudaGetErrorString(error), expression));
}

void throw_cublas_error(cublasStatus_t status, const char* expression, const char* file, int line) {
  throw CudaError(fmt::format("{}:{}: cuBLAS error {} ({}) in `{}`", file, line, static_cast<int>(status),
                              cublasLtGetStatusString(status), expression));
}

void throw_cuda_usage_error(const char* message, const char* file, int line) {
  throw CudaError(fmt::format("{}:{}: invalid kernel arguments: {}", file, line, message));
}

}  // namespace surogate::cuda
