// The sampled choice of a round whose logits stay on the GPU: cuda/kernels/sample_tokens.h over
// the plan's logits tensor in place; the rows' options and contexts go up, the ids come back
// (the KV cache model's feed_sampled on CUDA, generate/kv_cache_model.cpp).
#pragma once

#if SUROGATE_WITH_CUDA

#include <cstdint>
#include <span>
#include <vector>

#include "core/token_draw.h"
#include "cuda/device_buffer.h"
#include "core/dtype.h"
#include "graph/graph.h"
#include "runtime/cuda_backend.h"

namespace surogate::generate {

class DeviceSampling {
 public:
  // tokens[r] = ops::sample_tokens' choice for row r of `logits` ([rows.size(), vocab], F32, BF16
  // or F16 on `backend`) under rows[r], with contexts[r] for its repetition penalty.
  std::vector<int32_t> choose(runtime::CudaBackend& backend, graph::TensorId logits, DType dtype, int64_t vocab,
                              std::span<const RowSampling> rows,
                              std::span<const std::span<const int32_t>> contexts);

 private:
  cuda::DeviceBuffer<RowSampling> params_;  // grown as needed, kept from step to step
  cuda::DeviceBuffer<int32_t> context_, tokens_;
};

}  // namespace surogate::generate

#endif
