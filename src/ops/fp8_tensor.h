// A 2-D weight in the fp8_hybrid recipe's per-tensor format (models/fp8_recipe.h): E4M3 codes at
// scale = fp8_scale(amax) = 448 / max |w| (quant/fp8.h), the same codes transposed (FP8 tensor-core
// products take both operands K-major, so the backward's product reads the transpose), and
// scale_inv = 1 / scale. One function for every place that makes the format on the host: the
// trainer quantizing a frozen base weight as it loads (train/quantized_weights.h), the CPU op
// quantize_fp8_weight (ops/defs/fp8_linear_def.cpp) and the CPU devices' FP8 copies of trained
// weights (train/fp8_weight_copies.h). The CUDA kernel cuda::fp8_quantize_weight
// (cuda/kernels/fp8_quantize.h) writes the same bytes.
#pragma once

#include <cstdint>

namespace surogate::ops {

// values [rows, columns] → codes [rows, columns], transposed [columns, rows]; returns scale_inv.
// Runs on all cores; the result does not depend on their number.
float quantize_fp8_tensor(const float* values, int64_t rows, int64_t columns, uint8_t* codes, uint8_t* transposed);

}  // namespace surogate::ops
