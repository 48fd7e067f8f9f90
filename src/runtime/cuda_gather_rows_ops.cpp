// CUDA binders of gather_rows and gather_rows_sum (ops/defs/gather_rows_def.cpp: prompt sharing's
// gathers around attention): cuda/kernels/gather_rows.h. gather_rows copies bytes of any dtype;
// gather_rows_sum adds BF16 / F16 / F32 rows in fp32.
#include "core/error.h"
#include "cuda/kernels/gather_rows.h"
#include "runtime/cuda_bind_checks.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

// Elements of one token of a [B, tokens, ...] tensor.
int64_t token_width(const graph::TensorType& type) {
  int64_t width = 1;
  for (size_t d = 2; d < type.shape.size(); ++d) width *= type.shape[d];
  return width;
}

CudaKernel bind_gather_rows(const CudaBindContext& ctx) {
  const int64_t rows = ctx.outputs[0].shape[0] * ctx.outputs[0].shape[1];
  const int64_t width = token_width(ctx.outputs[0]);
  const int element_bytes = static_cast<int>(dtype_size_bytes(ctx.inputs[0].dtype));
  return [=](const CudaKernelArgs& args) {
    cuda::gather_rows(args.inputs[0].data, args.inputs[1].as<const int32_t>(), rows, width, element_bytes,
                      args.outputs[0].data, args.stream);
  };
}

CudaKernel bind_gather_rows_sum(const CudaBindContext& ctx) {
  const DType dtype = ctx.inputs[0].dtype;
  require(ctx, dtype == DType::BF16 || dtype == DType::F16 || dtype == DType::F32,
          "the CUDA backend sums BF16, F16 or F32 rows, got {}", graph::format_type(ctx.inputs[0]));
  const int64_t rows = ctx.outputs[0].shape[0] * ctx.outputs[0].shape[1];
  const int64_t width = token_width(ctx.outputs[0]);
  const int64_t fan_in = ctx.inputs[1].shape[2];
  if (dtype == DType::F32) {
    return [=](const CudaKernelArgs& args) {
      cuda::gather_rows_sum(args.inputs[0].as<const float>(), args.inputs[1].as<const int32_t>(), rows, fan_in, width,
                            args.outputs[0].as<float>(), args.stream);
    };
  }
  return by_element_type(dtype, [&]<typename T>() -> CudaKernel {
    return [=](const CudaKernelArgs& args) {
      cuda::gather_rows_sum(args.inputs[0].as<const T>(), args.inputs[1].as<const int32_t>(), rows, fan_in, width,
                            args.outputs[0].as<T>(), args.stream);
    };
  });
}

}  // namespace

void register_gather_rows_cuda_ops(CudaOpTable& table) {
  table.add("gather_rows", bind_gather_rows);
  table.add("gather_rows_sum", bind_gather_rows_sum);
}

}  // namespace surogate::runtime
