// Programmatic dependent launch (Hopper PDL) on the host side: whether a launch may overlap the
// kernel before it on a stream, and the launch attribute that asks for it. The device side
// (griddepcontrol.wait / launch_dependents) is cuda/kernels/dependent_launch.cuh.
//
// The contract every kernel launched with the attribute keeps: it reads nothing the previous kernel
// writes, and writes nothing the previous kernel reads, before griddepcontrol.wait; and it lets the
// next launch begin (launch_dependents) only after its own wait, so that when a kernel starts,
// everything before the kernel just ahead of it has finished.
#pragma once

#include <cuda_runtime_api.h>

namespace surogate::cuda {

// Whether a launch on `stream` may overlap the previous kernel: sm_90+ (cached per device) and the
// stream being captured (a graph's first kernel has no kernel before it in the graph, so what work
// before the graph launch wrote is safe; in eager code the previous kernel is unknown).
bool may_overlap_previous(cudaStream_t stream);

// The attribute of a cudaLaunchKernelEx that allows the overlap; numAttrs 1 when `overlap` and
// may_overlap_previous(stream), else 0 (the attribute then unused).
struct DependentLaunch {
  cudaLaunchAttribute attribute{};
  unsigned count = 0;
  DependentLaunch(bool overlap, cudaStream_t stream);
};

}  // namespace surogate::cuda
