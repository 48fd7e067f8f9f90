// 8-bit AdamW step (the device twin of train/optim/adamw_8bit.cpp): both moments are stored as
// one byte per element, the index of the nearest of 256 code values, times a per-block absolute
// maximum (blocks of kAdamW8bitBlock elements). Per block and step:
//   m, v   = dequantise(codes, absmax)
//   g      = grad · grad_scale                       (grad_scale: the device clip factor, may be null)
//   m      = β1·m + (1−β1)·g,   v = β2·v + (1−β2)·g²
//   master = master − (step_size · m / (sqrt(v) · second_correction + ε) + decay · master)
//   params = bf16(master)
// With a bf16 master (master null: master_dtype bf16) the weight is read from params and written
// back stochastically rounded (core/stochastic_rounding.h), the tensor's key being
// rounding_parameter_key(step.rounding_key, its index in the tensor table). The gradient is
// fp32 (grad) or bf16 (grad_bf16; gradient_dtype bf16), exactly one of them set.
//   absmax = max |m| (max v) over the block; codes = nearest code of m / absmax (v / absmax)
// The arithmetic is written with explicit round-to-nearest operations in the CPU optimizer's
// order, so the result matches it except where the CPU compiler fuses multiply-adds. One launch
// updates many tensors (a LoRA model has hundreds of small ones): a fixed grid of a few blocks of
// 256 threads per SM walks a job table, one quantisation block of some tensor per job, 8
// consecutive elements per thread (vector loads and stores where the pointers and the count
// allow). The code books and their nearest-code tables (cuda/kernels/nearest_code_table.h: one
// look-up per code instead of a binary search) are copied into shared memory once per block.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/kernels/adamw.h"
#include "cuda/kernels/nearest_code_table.h"

namespace surogate::cuda {

constexpr int64_t kAdamW8bitBlock = 2048;  // equals train::kQuantizationBlockSize

// One tensor's pointers (device memory); absmax arrays hold ceil(count / 2048) floats.
struct AdamW8bitTensor {
  __nv_bfloat16* params = nullptr;  // may be null with an fp32 master
  float* master = nullptr;          // null: params are the (bf16) master
  uint8_t* first_codes = nullptr;
  float* first_absmax = nullptr;
  uint8_t* second_codes = nullptr;
  float* second_absmax = nullptr;
  const float* grad = nullptr;
  int64_t count = 0;
  int decays = 1;                   // 0: no weight decay (norms, biases)
  const __nv_bfloat16* grad_bf16 = nullptr;  // instead of grad
};

// One entry per quantisation block to update: {index into the tensor table, block in the tensor}.
struct AdamW8bitJob {
  int32_t tensor;
  int32_t block;
};

// The code books of both moments (the 256 sorted code values of the first / second moment's map,
// train/optim/quantization_map.h) and their nearest-code tables; the kernel copies it whole into
// (dynamic) shared memory in 16-byte words: 49,184 bytes, just over the 48 KiB of static shared memory.
struct AdamW8bitCodes {
  float signed_code[256];
  float unsigned_code[256];
  uint32_t signed_table[kCodeTableSize];
  uint32_t unsigned_table[kCodeTableSize];
};
static_assert(sizeof(AdamW8bitCodes) % 16 == 0, "the kernel copies AdamW8bitCodes in 16-byte words");

// The code books with their tables, built on the host; throws where a code book is too dense
// for the table layout (build_nearest_code_table).
AdamW8bitCodes adamw_8bit_codes(const float* signed_code, const float* unsigned_code);

// Every job's block in one launch. tensors / jobs / codes are device arrays.
// step.decay (lr · weight_decay) applies where `decays`.
void adamw_8bit_update(const AdamW8bitTensor* tensors, const AdamW8bitJob* jobs, int64_t job_count,
                       const AdamW8bitCodes* codes, const float* grad_scale, const AdamWStep& step,
                       cudaStream_t stream);

}  // namespace surogate::cuda
