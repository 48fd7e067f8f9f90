// Load-time checks and small helpers shared by the CUDA binders of the model ops
// (runtime/cuda_model_ops.cpp, runtime/cuda_linear_ops.cpp, ...): dtype expectations and conditions
// that fail with a UserError naming the node, an async zero fill, the dispatch of a binder
// templated on the graph's 16-bit element type (BF16 → __nv_bfloat16, F16 → __half), and the
// RoPE ops' inverse frequencies on the device.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {

inline void expect_type(const CudaBindContext& ctx, bool output, size_t index, DType dtype) {
  const graph::TensorType& type = output ? ctx.outputs[index] : ctx.inputs[index];
  if (type.dtype != dtype) {
    fail_user("node '{}' (op {}): the CUDA backend runs this op with {} {} as {}, got {}; build the model graph in "
              "BF16 or F16 for the CUDA backend (models::DecoderGraphOptions::dtype)",
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

// The graph dtype of a kernel element type.
template <typename T>
constexpr DType element_dtype() {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "a 16-bit element type");
  return std::is_same_v<T, __half> ? DType::F16 : DType::BF16;
}

// bind.template operator()<T>() with T the element type of `dtype`: __half for F16,
// __nv_bfloat16 otherwise. A dtype that is neither goes to the bf16 binder, whose expect_in /
// expect_out checks refuse it naming the node.
template <typename Bind>
CudaKernel by_element_type(DType dtype, Bind&& bind) {
  if (dtype == DType::F16) return bind.template operator()<__half>();
  return bind.template operator()<__nv_bfloat16>();
}

inline int64_t last(const graph::TensorType& type) { return type.shape.empty() ? 1 : type.shape.back(); }

inline void zero_async(void* pointer, size_t bytes, cudaStream_t stream) {
  if (bytes > 0) CUDA_CHECK(cudaMemsetAsync(pointer, 0, bytes, stream));
}

// The node's 'inv_freq' attribute (the RoPE ops', as models::build_decoder_graph writes it) in fp32
// on the device, for the kernels that compute cos / sin themselves.
inline std::shared_ptr<cuda::DeviceBuffer<float>> device_inverse_frequency(const CudaBindContext& ctx) {
  require(ctx, ctx.attrs.has("inv_freq"),
          "the CUDA backend takes {} with an 'inv_freq' attribute (as models::build_decoder_graph writes it); "
          "tables from RoPE-config attributes are computed on the CPU backend only",
          ctx.node.op);
  std::vector<float> inverse;
  for (const auto& value : ctx.attrs.raw().at("inv_freq")) inverse.push_back(static_cast<float>(value.get<double>()));
  return std::make_shared<cuda::DeviceBuffer<float>>(cuda::to_device(inverse));
}

}  // namespace surogate::runtime
