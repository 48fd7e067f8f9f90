// Binders for toy_matmul, toy_tanh(_backward), toy_norm(_backward) onto toy_cuda_kernels.
#include "runtime_cuda/toy_cuda_ops.h"

#include "runtime_cuda/toy_cuda_kernels.h"

namespace surogate::testing {

using runtime::CudaBindContext;
using runtime::CudaKernel;
using runtime::CudaKernelArgs;

void register_toy_cuda_ops(runtime::CudaOpTable& table) {
  table.add("toy_matmul", [](const CudaBindContext& ctx) -> CudaKernel {
    ctx.expect_all(DType::F32);
    bool ta = ctx.attrs.boolean_or("transpose_a", false), tb = ctx.attrs.boolean_or("transpose_b", false);
    int64_t m = ctx.outputs[0].shape[0], n = ctx.outputs[0].shape[1];
    int64_t k = ctx.inputs[0].shape[ta ? 0 : 1];
    return [=](const CudaKernelArgs& args) {
      toy_cuda::matmul_f32(args.inputs[0].as<const float>(), args.inputs[1].as<const float>(),
                           args.outputs[0].as<float>(), m, n, k, ta, tb, args.stream);
    };
  });
  table.add("toy_tanh", [](const CudaBindContext& ctx) -> CudaKernel {
    ctx.expect_all(DType::F32);
    int64_t count = ctx.outputs[0].numel();
    return [=](const CudaKernelArgs& args) {
      toy_cuda::tanh_f32(args.inputs[0].as<const float>(), args.outputs[0].as<float>(), count, args.stream);
    };
  });
  table.add("toy_tanh_backward", [](const CudaBindContext& ctx) -> CudaKernel {
    ctx.expect_all(DType::F32);
    int64_t count = ctx.outputs[0].numel();
    return [=](const CudaKernelArgs& args) {
      toy_cuda::tanh_backward_f32(args.inputs[0].as<const float>(), args.inputs[1].as<const float>(),
                                  args.outputs[0].as<float>(), count, args.stream);
    };
  });
  table.add("toy_norm", [](const CudaBindContext& ctx) -> CudaKernel {
    ctx.expect_all(DType::F32);
    int64_t rows = ctx.inputs[0].shape[0], width = ctx.inputs[0].shape[1];
    float eps = static_cast<float>(ctx.attrs.number_or("eps", 1e-5));
    return [=](const CudaKernelArgs& args) {
      toy_cuda::norm_f32(args.inputs[0].as<const float>(), args.outputs[0].as<float>(), args.outputs[1].as<float>(),
                         rows, width, eps, args.stream);
    };
  });
  table.add("toy_norm_backward", [](const CudaBindContext& ctx) -> CudaKernel {
    ctx.expect_all(DType::F32);
    int64_t rows = ctx.inputs[0].shape[0], width = ctx.inputs[0].shape[1];
    return [=](const CudaKernelArgs& args) {
      toy_cuda::norm_backward_f32(args.inputs[0].as<const float>(), args.inputs[1].as<const float>(),
                                  args.inputs[2].as<const float>(), args.outputs[0].as<float>(), rows, width,
                                  args.stream);
    };
  });
}

const runtime::CudaOpTable& toy_cuda_table() {
  static const runtime::CudaOpTable table = [] {
    runtime::CudaOpTable built;
    runtime::register_core_cuda_ops(built);
    register_toy_cuda_ops(built);
    return built;
  }();
  return table;
}

}  // namespace surogate::testing
