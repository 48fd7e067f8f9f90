// RoPE through cos/sin tables (the graph's rope_cos_sin / rope ops); see rope_tables.h.
#include "cuda/kernels/rope_tables.h"

#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/elementwise_launch.cuh"

namespace surogate::cuda {
namespace {

using kernels::from_float;
using kernels::launch;
using kernels::to_float;

template <typename T>
__device__ __forceinline__ float load(const T* p, int64_t i) { return to_float(p[i]); }
template <typename T>
__device__ __forceinline__ void store(T* p, int64_t i, float v) { p[i] = from_float<T>(v); }

template <typename T>
struct RopeTablesOp {
  T* cos; T* sin; const int32_t* positions; const float* inv_freq; int half; float scaling;
  __device__ void operator()(int64_t i) const {
    const int64_t token = i / half;
    const int f = static_cast<int>(i % half);
    const float angle = __fmul_rn(static_cast<float>(positions[token]), inv_freq[f]);
    store(cos, i, __fmul_rn(cosf(angle), scaling));
    store(sin, i, __fmul_rn(sinf(angle), scaling));
  }
};

template <typename T>
struct MropeTablesOp {
  T* cos; T* sin; const int32_t* positions; const float* inv_freq; int64_t tokens; int half, section_t, section_h,
      section_w;
  bool interleaved;
  float scaling;
  __device__ void operator()(int64_t i) const {
    const int64_t token = i / half;
    const int f = static_cast<int>(i % half);
    int axis;
    if (interleaved) {
      const int k = f % 3;
      axis = (k == 1 && f < 3 * section_h) || (k == 2 && f < 3 * section_w) ? k : 0;
    } else {
      axis = f < section_t ? 0 : (f < section_t + section_h ? 1 : 2);
    }
    const float angle = __fmul_rn(static_cast<float>(positions[axis * tokens + token]), inv_freq[f]);
    store(cos, i, __fmul_rn(cosf(angle), scaling));
    store(sin, i, __fmul_rn(sinf(angle), scaling));
  }
};

template <typename E, typename T>
struct RopeApplyOp {
  E* out; const E* x; const T* cos; const T* sin; int heads, head_dim, half; float sign;
  __device__ void operator()(int64_t i) const {
    const int j = static_cast<int>(i % head_dim);
    const int64_t token = i / (static_cast<int64_t>(heads) * head_dim);
    const int64_t row = i - j;
    float value;
    if (j < half) {
      const float c = load(cos, token * half + j), s = sign * load(sin, token * half + j);
      value = to_float(x[i]) * c - to_float(x[row + j + half]) * s;
    } else if (j < 2 * half) {
      const float c = load(cos, token * half + j - half), s = sign * load(sin, token * half + j - half);
      value = to_float(x[i]) * c + to_float(x[row + j - half]) * s;
    } else {
      value = to_float(x[i]);
    }
    out[i] = from_float<E>(value);
  }
};

}  // namespace

template <typename T>
void rope_tables(T* cos, T* sin, const int32_t* position_ids, const float* inv_freq, int64_t tokens, int half,
                 float scaling, cudaStream_t stream) {
  launch(RopeTablesOp<T>{cos, sin, position_ids, inv_freq, half, scaling}, tokens * half, stream);
}

template <typename T>
void mrope_tables(T* cos, T* sin, const int32_t* position_ids, const float* inv_freq, int64_t tokens, int half,
                  int section_t, int section_h, int section_w, bool interleaved, float scaling, cudaStream_t stream) {
  launch(MropeTablesOp<T>{cos, sin, position_ids, inv_freq, tokens, half, section_t, section_h, section_w, interleaved,
                          scaling},
         tokens * half, stream);
}

template <typename E, typename T>
void rope_apply(E* out, const E* x, const T* cos, const T* sin, int64_t tokens, int heads, int head_dim,
                int half, float sign, cudaStream_t stream) {
  launch(RopeApplyOp<E, T>{out, x, cos, sin, heads, head_dim, half, sign}, tokens * heads * head_dim, stream);
}

template void rope_tables<float>(float*, float*, const int32_t*, const float*, int64_t, int, float, cudaStream_t);
template void mrope_tables<float>(float*, float*, const int32_t*, const float*, int64_t, int, int, int, int, bool,
                                  float, cudaStream_t);

#define INSTANTIATE(E)                                                                                      \
  template void rope_tables<E>(E*, E*, const int32_t*, const float*, int64_t, int, float, cudaStream_t);     \
  template void mrope_tables<E>(E*, E*, const int32_t*, const float*, int64_t, int, int, int, int, bool,      \
                                float, cudaStream_t);                                                       \
  template void rope_apply<E, float>(E*, const E*, const float*, const float*, int64_t, int, int, int, float, \
                                     cudaStream_t);                                                          \
  template void rope_apply<E, E>(E*, const E*, const E*, const E*, int64_t, int, int, int, float, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
