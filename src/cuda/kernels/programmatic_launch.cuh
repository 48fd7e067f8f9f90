// Hopper's programmatic dependent launch (PDL) for chains of short kernels, as a decode step is:
// a kernel launched with it may start while the kernel before it on the stream still runs, so its
// blocks are resident (and a GEMV's weight loads in flight) by the time that kernel ends, instead
// of a launch gap after it. The rules a kernel keeps to be launched so:
//   * wait_for_previous_grid() before its first read or write of anything another kernel writes
//     or reads (it returns once the kernel before has completed and its writes are visible; at
//     once without a programmatic launch). A kernel that waits first thing is safe after any
//     kernel; decode_gemv.h reads its weights before the wait, which only weights no kernel of
//     the graph writes allow;
//   * what another kernel writes is never read with __ldg / ld.global.nc (nor through a const
//     __restrict__ pointer the compiler may turn into one): such a load promises the memory does
//     not change while the kernel lives, so the compiler may hoist it above the wait — it did in
//     decode_gemv.cu at 8 rows a block (2026-11-30), and the step read the previous x;
//   * allow_next_grid() lets the next programmatic launch begin (once every block has called it
//     or ended); it never makes this kernel's writes visible early, the next kernel's wait does.
// Completion is transitive: a kernel cannot complete before its wait returned, so after a wait
// every kernel before on the stream has completed.
// launch_programmatic launches with the attribute only where it helps and is defined: on sm_90+
// and while the stream is being captured into a graph (may_overlap_previous).
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

#include "cuda/cuda_check.h"

namespace surogate::cuda {

__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// sm_90+ (asked once per device) and `stream` being captured: a graph's first kernel has no
// kernel before it in the graph, and in eager code the kernel before is unknown.
bool may_overlap_previous(cudaStream_t stream);

// kernel<<<grid, block, shared, stream>>>(args...), with the programmatic attribute when `overlap`
// and may_overlap_previous(stream).
template <typename... Params, typename... Args>
void launch_programmatic(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
                         bool overlap, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = overlap && may_overlap_previous(stream) ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace surogate::cuda
