// Load-time checks and small helpers shared by the CUDA binders of the model ops
// (runtime/cuda_model_ops.cpp, runtime/cuda_linear_ops.cpp): dtype expectations and conditions
// that fail with a UserError naming the node, and an async zero fill.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {

inline void expect_type(const CudaBindContext& ctx, bool output, size_t index, DType dtype) {
  const graph::TensorType& type = output ? ctx.outputs[index] : ctx.inputs[index];
  if (type.dtype != dtype) {
    fail_user("node '{}' (op {}): the CUDA backend runs this op with {} {} as {}, got {}; build the model graph in "
              "BF16 for the CUDA backend (models::DecoderGraphOptions::dtype)",
              ctx.node.name, ctx.node.op, output ? "output" : "input", index, dtype_safetensors_name(dtype),
              graph::format_type(type));
  }
}
inline void expect_in(const CudaBindContext& ctx, size_t index, DType dtype) { expect_type(ctx, false, index, dtype); }
inline void expect_out(const CudaBindContext& ctx, size_t index, DType dtype) { expect_type(ctx, true, index, dtype); }

template <typename... Args>
inline void require(const CudaBindContext& ctx, bool condition, fmt::format_string<Args...> format, Args&&... args) {
  if (!condition) {
    fail_user("node '{}' (op {}): {}", ctx.node.name, ctx.node.op, fmt::format(format, std::forward<Args>(args)...));
  }
}

inline int64_t last(const graph::TensorType& type) { return type.shape.empty() ? 1 : type.shape.back(); }

inline void zero_async(void* pointer, size_t bytes, cudaStream_t stream) {
  if (bytes > 0) CUDA_CHECK(cudaMemsetAsync(pointer, 0, bytes, stream));
}

}  // namespace surogate::runtime
