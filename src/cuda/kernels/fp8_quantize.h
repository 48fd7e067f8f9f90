// The fp8_hybrid recipe's quantization on the GPU (quant/fp8.h and quant/fp8_scaling.h are the
// formats, the rules and the CPU reference; ops/defs/fp8_linear_def.cpp the emulating CPU op):
//
//   fp8_record_amax     max |x| into *amax (zeroed by the caller) — unless row[0] > 0, when the
//                       site scales by its delayed amax and the tensor's own is not needed;
//   fp8_quantize        q = cvt.satfinite(x · scale) with scale = fp8_scale(row[0] > 0 ? row[0] :
//                       *amax), scale_inv = 1 / scale; records max |x| into row[1] (the step's
//                       running max).
// Run one after the other on a stream, the pair quantizes like the CPU reference, bit for bit
// (tests/runtime_cuda/test_fp8_cuda.cpp). `row` is a site's row of the scaling state, or two
// zeroed floats of scratch for current scaling (evaluation graphs; then amax may be row + 1).
//   fp8_roll_history    after an optimizer step (or a calibration, with headroom):
//                       quant::roll_fp8_history on the device.
//   fp8_drop_current_amaxes  quant::drop_current_amaxes on the device (a step skipped, a
//                       forward that belongs to no step): every site's row[1] back to 0.
//   fp8_quantize_weight a bf16 weight [rows, columns] in the per-tensor format of ops/fp8_tensor.h:
//                       E4M3 codes at scale 448 / max |w|, the codes transposed, scale_inv (`amax`
//                       is one float of scratch); bit for bit the CPU function.
//   fp8_transpose       FP8 codes [rows, columns] → [columns, rows] (the weight gradient's
//                       operands: FP8 products take both K-major, and there K is the tokens).
//                       These live in fp8_transpose.cu: tiles of 128-byte lines with 16-byte
//                       accesses where the width is a multiple of 128 (64 × 64-byte tiles, or
//                       a byte per thread, otherwise).
//   Fp8Output / fp8_quantize_pending  a producer that quantizes its own bf16 output (E4M3, or
//                       E5M2 for a gradient; rmsnorm.h, swiglu.h: the "_fp8" entry points;
//                       fp8_epilogue.cuh): with a
//                       delayed amax (row[0] > 0) it writes the codes, scale_inv and row[1]
//                       itself, and fp8_quantize_pending does nothing; without, it records its
//                       amax into *amax (zeroed by the caller) and fp8_quantize_pending quantizes
//                       its output as fp8_quantize does. Together: bit for bit the two kernels
//                       above run after the producer. With delayed_known (the host read the
//                       site's row[0] > 0 after the last roll) nothing is launched: the launch,
//                       tiny as it is, cost ~2–3 µs per producer, ten producers per layer.
// Amaxes are compared as unsigned bit patterns (atomicMax), as the CPU reference compares them.
// The 8-wide path (16-byte loads, 8-byte stores) runs when x and q are aligned and n % 8 == 0.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

enum class Fp8Target : uint8_t { E4M3, E5M2 };

void fp8_record_amax(const __nv_bfloat16* x, int64_t n, const float* row, float* amax, cudaStream_t stream);
void fp8_quantize(const __nv_bfloat16* x, int64_t n, Fp8Target format, float* row, const float* amax, uint8_t* q,
                  float* scale_inv, cudaStream_t stream);
struct Fp8Output {
  float* row = nullptr;        // the site's row of the scaling state
  float* amax = nullptr;       // one zeroed float of scratch
  uint8_t* q = nullptr;        // E4M3 codes, the output's shape
  float* scale_inv = nullptr;  // one float
  Fp8Target format = Fp8Target::E4M3;
  // The host knows row[0] > 0 (runtime::CudaResources::fp8_delayed): the producer quantizes in
  // its epilogue for sure, so fp8_quantize_pending launches nothing and `amax` is never read.
  bool delayed_known = false;

  // Whether the producer must still store its bf16 output, `read` saying whether a later step
  // reads it: an unread one is skipped (null) once delayed_known, when no pending pass reads it
  // either (full fine-tuning's projections read only the codes).
  bool needs_bf16(bool read) const { return read || !delayed_known; }
};
void fp8_quantize_pending(const __nv_bfloat16* x, int64_t n, const Fp8Output& site, cudaStream_t stream);
void fp8_roll_history(float* state, int64_t sites, int64_t history, int64_t step, cudaStream_t stream,
                      float headroom = 1.0f);
void fp8_drop_current_amaxes(float* state, int64_t sites, int64_t history, cudaStream_t stream);
void fp8_quantize_weight(const __nv_bfloat16* w, int64_t rows, int64_t columns, float* amax, uint8_t* codes,
                         uint8_t* transposed, float* scale_inv, cudaStream_t stream);
void fp8_transpose(const uint8_t* in, int64_t rows, int64_t columns, uint8_t* out, cudaStream_t stream);

}  // namespace surogate::cuda
