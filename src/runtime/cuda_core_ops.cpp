// CUDA binders for the engine's core ops (graph/core_ops.cpp), fp32; add, scale, scale_by, scale_rows, fill and accumulate
// also bf16 / fp16 (the residual stream and gradient sums of BF16 / F16 model graphs, fp32-summed,
// rounded once), and mul, sum and broadcast (a pipeline stage's loss). Each
// parses its attrs once at load and returns a closure that launches one kernel from
// cuda/kernels/core_ops.h or cuda/kernels/elementwise_16bit.h.
// Semantics match the CPU kernels: scale rounds its factor to float, sum accumulates in double.
#include "cuda/kernels/core_ops.h"
#include "cuda/kernels/elementwise_16bit.h"
#include "runtime/cuda_bind_checks.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

namespace k = cuda;

CudaKernel bind_binary(const CudaBindContext& ctx,
                       void (*launcher)(const float*, const float*, float*, int64_t, cudaStream_t)) {
  ctx.expect_all(DType::F32);
  const int64_t count = ctx.outputs[0].numel();
  return [count, launcher](const CudaKernelArgs& args) {
    launcher(args.inputs[0].as<const float>(), args.inputs[1].as<const float>(), args.outputs[0].as<float>(), count,
             args.stream);
  };
}

// Every input and output in `dtype`.
bool all_of(const CudaBindContext& ctx, DType dtype) {
  for (const auto& type : ctx.inputs) if (type.dtype != dtype) return false;
  for (const auto& type : ctx.outputs) if (type.dtype != dtype) return false;
  return true;
}
// Every input and output BF16, or every one F16 (the 16-bit kernels); otherwise the F32 ones.
bool all_16bit(const CudaBindContext& ctx) { return all_of(ctx, DType::BF16) || all_of(ctx, DType::F16); }

CudaKernel bind_add(const CudaBindContext& ctx) {
  if (all_16bit(ctx)) {
    const int64_t count = ctx.outputs[0].numel();
    return by_element_type(ctx.outputs[0].dtype, [&]<typename T>() -> CudaKernel {
      return [count](const CudaKernelArgs& args) {
        k::add_16bit(args.inputs[0].as<const T>(), args.inputs[1].as<const T>(), args.outputs[0].as<T>(), count,
                     args.stream);
      };
    });
  }
  return bind_binary(ctx, k::add_f32);
}
CudaKernel bind_mul(const CudaBindContext& ctx) {
  if (all_16bit(ctx)) {
    const int64_t count = ctx.outputs[0].numel();
    return by_element_type(ctx.outputs[0].dtype, [&]<typename T>() -> CudaKernel {
      return [count](const CudaKernelArgs& args) {
        k::mul_16bit(args.inputs[0].as<const T>(), args.inputs[1].as<const T>(), args.outputs[0].as<T>(), count,
                     args.stream);
      };
    });
  }
  return bind_binary(ctx, k::mul_f32);
}

CudaKernel bind_scale(const CudaBindContext& ctx) {
  if (all_16bit(ctx)) {  // the LoRA branch's alpha / r in BF16 / F16 graphs
    const int64_t count = ctx.outputs[0].numel();
    const float factor = static_cast<float>(ctx.attrs.number("factor"));
    return by_element_type(ctx.outputs[0].dtype, [&]<typename T>() -> CudaKernel {
      return [count, factor](const CudaKernelArgs& args) {
        k::scale_16bit(args.inputs[0].as<const T>(), factor, args.outputs[0].as<T>(), count, args.stream);
      };
    });
  }
  ctx.expect_all(DType::F32);
  const int64_t count = ctx.outputs[0].numel();
  const float factor = static_cast<float>(ctx.attrs.number("factor"));
  return [count, factor](const CudaKernelArgs& args) {
    k::scale_f32(args.inputs[0].as<const float>(), factor, args.outputs[0].as<float>(), count, args.stream);
  };
}

// scale_by (x, factor []) -> x · factor: BF16 / F16 x with an F32 factor, or F32 throughout.
CudaKernel bind_scale_by(const CudaBindContext& ctx) {
  const int64_t count = ctx.outputs[0].numel();
  const DType dtype = ctx.inputs[0].dtype;
  if ((dtype == DType::BF16 || dtype == DType::F16) && ctx.outputs[0].dtype == dtype) {
    return by_element_type(dtype, [&]<typename T>() -> CudaKernel {
      return [count](const CudaKernelArgs& args) {
        k::scale_16bit_by(args.inputs[0].as<const T>(), args.inputs[1].as<const float>(), args.outputs[0].as<T>(),
                          count, args.stream);
      };
    });
  }
  ctx.expect_all(DType::F32);
  return [count](const CudaKernelArgs& args) {
    k::mul_scalar_f32(args.inputs[0].as<const float>(), args.inputs[1].as<const float>(), args.outputs[0].as<float>(),
                      count, args.stream);
  };
}

// scale_rows (x [..., W], factor [...]) -> x · factor per row, every tensor F32, BF16 or F16.
CudaKernel bind_scale_rows(const CudaBindContext& ctx) {
  const int64_t count = ctx.outputs[0].numel();
  const int64_t width = ctx.outputs[0].shape.back();
  if (all_16bit(ctx)) {
    return by_element_type(ctx.outputs[0].dtype, [&]<typename T>() -> CudaKernel {
      return [count, width](const CudaKernelArgs& args) {
        k::scale_rows(args.inputs[0].as<const T>(), args.inputs[1].as<const T>(), args.outputs[0].as<T>(), count, width,
                      args.stream);
      };
    });
  }
  ctx.expect_all(DType::F32);
  return [count, width](const CudaKernelArgs& args) {
    k::scale_rows(args.inputs[0].as<const float>(), args.inputs[1].as<const float>(), args.outputs[0].as<float>(), count,
                  width, args.stream);
  };
}

CudaKernel bind_fill(const CudaBindContext& ctx) {
  if (all_16bit(ctx)) {
    const int64_t count = ctx.outputs[0].numel();
    const float value = static_cast<float>(ctx.attrs.number("value"));
    return by_element_type(ctx.outputs[0].dtype, [&]<typename T>() -> CudaKernel {
      return [count, value](const CudaKernelArgs& args) {
        k::fill_16bit(value, args.outputs[0].as<T>(), count, args.stream);
      };
    });
  }
  ctx.expect_all(DType::F32);
  const int64_t count = ctx.outputs[0].numel();
  const float value = static_cast<float>(ctx.attrs.number("value"));
  return [count, value](const CudaKernelArgs& args) {
    k::fill_f32(value, args.outputs[0].as<float>(), count, args.stream);
  };
}

CudaKernel bind_sum(const CudaBindContext& ctx) {
  if (all_16bit(ctx)) {
    const int64_t count = ctx.inputs[0].numel();
    return by_element_type(ctx.outputs[0].dtype, [&]<typename T>() -> CudaKernel {
      return [count](const CudaKernelArgs& args) {
        k::sum_16bit(args.inputs[0].as<const T>(), args.outputs[0].as<T>(), count, args.stream);
      };
    });
  }
  ctx.expect_all(DType::F32);
  const int64_t count = ctx.inputs[0].numel();
  return [count](const CudaKernelArgs& args) {
    k::sum_f32(args.inputs[0].as<const float>(), args.outputs[0].as<float>(), count, args.stream);
  };
}

CudaKernel bind_broadcast(const CudaBindContext& ctx) {
  if (all_16bit(ctx)) {
    const int64_t count = ctx.outputs[0].numel();
    return by_element_type(ctx.outputs[0].dtype, [&]<typename T>() -> CudaKernel {
      return [count](const CudaKernelArgs& args) {
        k::broadcast_16bit(args.inputs[0].as<const T>(), args.outputs[0].as<T>(), count, args.stream);
      };
    });
  }
  ctx.expect_all(DType::F32);
  const int64_t count = ctx.outputs[0].numel();
  return [count](const CudaKernelArgs& args) {
    k::broadcast_f32(args.inputs[0].as<const float>(), args.outputs[0].as<float>(), count, args.stream);
  };
}

CudaKernel bind_accumulate(const CudaBindContext& ctx) {
  if (all_16bit(ctx)) {
    const int64_t count = ctx.outputs[0].numel();
    return by_element_type(ctx.outputs[0].dtype, [&]<typename T>() -> CudaKernel {
      return [count](const CudaKernelArgs& args) {
        k::accumulate_16bit(args.inputs[0].as<const T>(), args.outputs[0].as<T>(), count, args.stream);
      };
    });
  }
  ctx.expect_all(DType::F32);
  const int64_t count = ctx.outputs[0].numel();
  return [count](const CudaKernelArgs& args) {
    k::accumulate_f32(args.inputs[0].as<const float>(), args.outputs[0].as<float>(), count, args.stream);
  };
}

}  // namespace

void register_core_cuda_ops(CudaOpTable& table) {
  table.add("add", bind_add);
  table.add("mul", bind_mul);
  table.add("scale", bind_scale);
  table.add("scale_by", bind_scale_by);
  table.add("scale_rows", bind_scale_rows);
  table.add("fill", bind_fill);
  table.add("sum", bind_sum);
  table.add("broadcast", bind_broadcast);
  table.add("accumulate", bind_accumulate);
}

}  // namespace surogate::runtime
