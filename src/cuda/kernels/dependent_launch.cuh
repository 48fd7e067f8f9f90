// Programmatic dependent launch on the device (griddepcontrol, sm_90+; nothing on older targets).
// The host side and the contract: cuda/dependent_launch.h.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "cuda/cuda_check.h"
#include "cuda/dependent_launch.h"

namespace surogate::cuda::kernels {

// Wait until the grid this one depends on has completed and its writes are visible (returns at
// once when the launch was not programmatic).
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Let the next launch begin once every block of this grid has said so (or exited).
__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launches `kernel` on `stream`, programmatically (DependentLaunch) when `overlap` and the stream
// is being captured on sm_90+. The kernel must keep dependent_launch.h's contract.
template <typename... Parameters, typename... Arguments>
void launch_dependent(void (*kernel)(Parameters...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                      bool overlap, Arguments&&... arguments) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  DependentLaunch dependent(overlap, stream);
  config.attrs = &dependent.attribute;
  config.numAttrs = dependent.count;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Arguments>(arguments)...));
}

}  // namespace surogate::cuda::kernels
