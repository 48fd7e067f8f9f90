// SUROGATE_HOST_DEVICE marks a function that host and device code share (bit-for-bit arithmetic
// the CPU references and the CUDA kernels both run): __host__ __device__ under nvcc, nothing else.
#pragma once

#if defined(__CUDACC__)
#define SUROGATE_HOST_DEVICE __host__ __device__
#else
#define SUROGATE_HOST_DEVICE
#endif
