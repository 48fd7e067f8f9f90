// Tensor-core fragment helpers for the attention kernels, for a 16-bit element type T
// (__nv_bfloat16 or __half: cuda/kernels/element_type.cuh): mma.sync m16n8k16 (T → fp32; the
// .bf16.bf16.f32 or .f16.f16.f32 form), ldmatrix.x4.trans, pair packing, tile copies (the
// document search: document_search.cuh).
//
// Fragment layout of m16n8k16 (g = lane / 4, t = lane % 4):
//   A 16×16: a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B 16×8:  b0 = (k = 2t..2t+1, n = g), b1 = (k = 2t+8.., n = g)
//   C 16×8:  c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..2t+1)
// Two neighbouring C tiles (n-tiles 2j, 2j+1) re-packed to T are exactly the A fragment of
// the k-slice j: this is how probabilities feed the next product without shared memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include <cstdint>

#include "cuda/kernels/attention.h"
#include "cuda/kernels/document_search.cuh"
#include "cuda/kernels/element_type.cuh"

namespace surogate::cuda {
// Throws (CUDA_REQUIRE) on shapes the kernels do not handle; shared by forward and backward.
void check_attention_shape(const AttentionShape& shape);
}  // namespace surogate::cuda

// bf16 mma.sync and cp.async are SM80+. A build that also targets SM75 (GPUs without bf16 tensor
// cores) compiles them there as a trap (the fp16 form too: the kernels are one template), so one
// binary serves every target: the backend never
// launches these kernels on such a GPU (train/device/backend_selection.cpp trains on the CPU there
// and says why).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define SUROGATE_SM80_INSTRUCTIONS 0
#else
#define SUROGATE_SM80_INSTRUCTIONS 1
#endif

namespace surogate::cuda::attention {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kPad = 8;  // 16-bit elements of padding per shared-memory row (16 bytes)
constexpr float kLog2e = 1.4426950408889634f;

template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if !SUROGATE_SM80_INSTRUCTIONS
  __trap();
#else
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "mma_16816: bf16 or fp16 operands");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// Four 8×8 16-bit matrices; lane l gives the row address of matrix l / 8, row l % 8. Lane (g, t)
// receives row g, columns 2t..2t+1 of each matrix: from a row-major [m][k] tile this is an A
// fragment (matrices: rows 0-7 / 8-15 × k 0-7 / 8-15), from a row-major [n][k] tile the B
// fragments of two neighbouring n-tiles.
template <typename T>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const T* address) {
  const uint32_t shared = static_cast<uint32_t>(__cvta_generic_to_shared(address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared));
}

// Four 8×8 16-bit matrices, transposed; lane l gives the row address of matrix l / 8, row l % 8.
template <typename T>
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const T* address) {
  const uint32_t shared = static_cast<uint32_t>(__cvta_generic_to_shared(address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared));
}

// Two fp32 values rounded to a T pair (an A fragment register).
template <typename T>
__device__ __forceinline__ uint32_t pack_x2(float low, float high) {
  return kernels::pack_pair<T>(low, high);
}

template <typename T>
__device__ __forceinline__ uint32_t load_pair(const T* address) {
  return *reinterpret_cast<const uint32_t*>(address);
}

// Copies `rows` rows of head_dim T (global row stride `stride` elements, starting at `source`)
// into a padded shared tile; rows at or past `valid_rows` are zero-filled. 16-byte vectors.
template <int kHeadDim, int kThreadCount = kThreads, typename T>
__device__ __forceinline__ void load_tile(T* tile, const T* source, int64_t stride,
                                          int rows, int64_t valid_rows) {
  constexpr int kVectors = kHeadDim / 8;
  for (int chunk = threadIdx.x; chunk < rows * kVectors; chunk += kThreadCount) {
    const int row = chunk / kVectors, column = (chunk % kVectors) * 8;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (row < valid_rows) value = *reinterpret_cast<const uint4*>(source + row * stride + column);
    *reinterpret_cast<uint4*>(tile + row * (kHeadDim + kPad) + column) = value;
  }
}

// Asynchronous 16-byte global → shared copy (cp.async, sm_80+); `valid` false writes zeros.
__device__ __forceinline__ void copy_async_16(void* shared_target, const void* global_source, bool valid) {
#if !SUROGATE_SM80_INSTRUCTIONS
  __trap();
#else
  const uint32_t shared = static_cast<uint32_t>(__cvta_generic_to_shared(shared_target));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(global_source),
               "r"(valid ? 16 : 0));
#endif
}
__device__ __forceinline__ void copy_async_commit() {
#if SUROGATE_SM80_INSTRUCTIONS
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int kPending>
__device__ __forceinline__ void copy_async_wait() {
#if SUROGATE_SM80_INSTRUCTIONS
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// load_tile through cp.async: the caller commits, waits and synchronises.
template <int kHeadDim, int kThreadCount = kThreads, typename T>
__device__ __forceinline__ void load_tile_async(T* tile, const T* source, int64_t stride,
                                                int rows, int64_t valid_rows) {
  constexpr int kVectors = kHeadDim / 8;
  for (int chunk = threadIdx.x; chunk < rows * kVectors; chunk += kThreadCount) {
    const int row = chunk / kVectors, column = (chunk % kVectors) * 8;
    const bool valid = row < valid_rows;
    copy_async_16(tile + row * (kHeadDim + kPad) + column, valid ? source + row * stride + column : source, valid);
  }
}

}  // namespace surogate::cuda::attention
