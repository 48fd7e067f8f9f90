// NVFP4 quantization on the GPU: the quantizer of the nvfp4 recipe (which waits for a Blackwell GPU
// to run its FP4 matmuls; until then nothing in a plan calls this), built and checked against the
// CPU reference now. quant/nvfp4.h is the format and the rule; this is the same computation, every
// fp32 operation rounded on its own (__fmul_rn, __fdiv_rn, ...), E4M3 by the satfinite conversion
// and E2M1 by cuda_fp4.h's __nv_cvt_float2_to_fp4x2 — the cvt.rn.satfinite.e2m1x2.f32 instruction on
// Blackwell, NVIDIA's exact emulation of it elsewhere — so the codes, block scales and tensor scale
// equal the CPU's byte for byte (tests/runtime_cuda/test_nvfp4_cuda.cpp).
//   nvfp4_amax       max |x| over n bf16 values into *amax (zeroed first, on the stream);
//   quantize_nvfp4   x bf16 [rows, cols] (activations [tokens, K] or weights [N, K]: blocks of 16
//                    along the last dimension) with the tensor scale of *amax: the packed E2M1 codes
//                    [rows, ceil(cols/2)], the E4M3 block scales [rows, ceil(cols/16)] (row-major,
//                    not yet the tensor cores' swizzled layout) and the decode scale into *decode.
// One thread per block of 16: it computes the block's largest value, both candidates under Four
// Over Six, and writes the block's 8 bytes and its scale.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

void nvfp4_amax(const __nv_bfloat16* x, int64_t n, float* amax, cudaStream_t stream);

void quantize_nvfp4(const __nv_bfloat16* x, int64_t rows, int64_t cols, bool four_over_six, const float* amax,
                    uint8_t* packed, uint8_t* block_scales, float* decode, cudaStream_t stream);

}  // namespace surogate::cuda
