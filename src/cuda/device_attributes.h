// The current device and its compute capability, asked of the driver once per device: launchers
// choose kernels by it on every call (decode steps launch hundreds a token), where a driver query
// each time is wasted work. Several GPUs in one process (ranks as threads) each keep their own.
#pragma once

namespace surogate::cuda {

int current_device();

// cudaDevAttrComputeCapabilityMajor of current_device(): 8 for sm_80 / sm_86 / sm_89, 9 for sm_90.
int current_compute_major();

}  // namespace surogate::cuda
