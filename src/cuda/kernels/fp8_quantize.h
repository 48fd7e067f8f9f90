// The fp8_hybrid recipe's quantization on the GPU (quant/fp8.h and quant/fp8_scaling.h are the
// formats, the rules and the CPU reference; ops/defs/fp8_linear_def.cpp the emulating CPU op):
//
//   fp8_record_amax  records max |x| into row[1] (a running max) — unless row[0] > 0, when the
//                    site scales by its delayed amax and the quantizer records instead;
//   fp8_quantize     q = cvt.satfinite(x · scale) with scale = fp8_scale(row[0] > 0 ? row[0] :
//                    row[1]), scale_inv = 1 / scale; records max |x| into row[1] when row[0] > 0.
// Run one after the other on a stream, the pair quantizes like the CPU reference, bit for bit
// (tests/runtime_cuda/test_fp8_cuda.cpp). `row` is a site's row of the scaling state, or two
// zeroed floats of scratch for current scaling (evaluation graphs).
//   fp8_roll_history after an optimizer step: quant::roll_fp8_history on the device.
// Amaxes are compared as unsigned bit patterns (atomicMax), as the CPU reference compares them.
// The 8-wide path (16-byte loads, 8-byte stores) runs when x and q are aligned and n % 8 == 0.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

enum class Fp8Target : uint8_t { E4M3, E5M2 };

void fp8_record_amax(const __nv_bfloat16* x, int64_t n, float* row, cudaStream_t stream);
void fp8_quantize(const __nv_bfloat16* x, int64_t n, Fp8Target format, float* row, uint8_t* q, float* scale_inv,
                  cudaStream_t stream);
void fp8_roll_history(float* state, int64_t sites, int64_t history, int64_t step, cudaStream_t stream);

}  // namespace surogate::cuda
