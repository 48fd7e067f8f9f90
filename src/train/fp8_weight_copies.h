// The FP8 copies of trained weights under recipe fp8_hybrid (models/fp8_recipe.h): in full
// fine-tuning and pt every quantized projection's weight W stays a trainable parameter, and the
// plan holds its FP8 form beside it as frozen parameters (<W>.fp8, <W>.fp8_t, <W>.scale_inv) that
// only the forward and backward products read. A device rewrites them from W once per optimizer
// step — after the optimizer has updated W, and after W has been loaded or restored — never per
// micro-batch. On the CPU that is ops::quantize_fp8_tensor on the backend's fp32 W; the CUDA
// devices run cuda::fp8_quantize_weight on the bf16 W (train/device/cuda_rank_state.h), the same
// bytes from the same values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "runtime/cpu_backend.h"

namespace surogate::train {

struct Fp8WeightCopy {
  graph::TensorId weight = graph::kNoTensor;  // W [rows, columns], the graph's dtype
  graph::TensorId codes = graph::kNoTensor, transposed = graph::kNoTensor, scale_inv = graph::kNoTensor;
  int64_t rows = 0, columns = 0;
};

// The trained weights of `plan` with an FP8 copy (none outside fp8_hybrid full fine-tuning / pt).
std::vector<Fp8WeightCopy> fp8_weight_copies(const compiler::ExecutionPlan& plan);

// Each copy rewritten from its weight (an F32 plan on the CPU backend).
void refresh_fp8_weight_copies(runtime::CpuBackend& backend, std::span<const Fp8WeightCopy> copies);

}  // namespace surogate::train
