// Graph ops "swiglu" (gate, up -> silu(gate)·up) and "swiglu_fused" (gate_up [..., 2I] ->
// [..., I]) with their backward ops, over ops/swiglu.h. All outputs are written by the math.
#include "ops/defs/def_util.h"
#include "ops/swiglu.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

void register_swiglu(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "swiglu",
      .inputs = {"gate", "up"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        ctx.expect_min_rank(0, 1);
        ctx.expect_same_type(0, 1);
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        auto grads = ctx.op("swiglu_backward", {ctx.output_grad(0), ctx.input(0), ctx.input(1)});
        return {if_needed(ctx, 0, grads[0]), if_needed(ctx, 1, grads[1])};
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t width = last_dim(ctx.inputs[0]), rows = ctx.inputs[0].numel() / width;
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            swiglu_forward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), rows, width, args.outputs[0].as<T>());
          };
        });
      },
      // fp32 elementwise math, one bf16 rounding: 4e-3 (tests/cuda/test_elementwise.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 4e-3},
  });
  registry.add(OpDef{
      .name = "swiglu_backward",
      .inputs = {"d_out", "gate", "up"},
      .outputs = {"d_gate", "d_up"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(1);
        ctx.expect_min_rank(1, 1);
        ctx.expect_same_type(1, 0);
        ctx.expect_same_type(1, 2);
        return std::vector<TensorType>{ctx.input(1), ctx.input(2)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t width = last_dim(ctx.inputs[1]), rows = ctx.inputs[1].numel() / width;
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            swiglu_backward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(), rows, width,
                            args.outputs[0].as<T>(), args.outputs[1].as<T>());
          };
        });
      },
      // fp32 elementwise math, one bf16 rounding: 4e-3 (tests/cuda/test_elementwise.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 4e-3},
  });
}

void register_swiglu_fused(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "swiglu_fused",
      .inputs = {"gate_up"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        ctx.expect_min_rank(0, 1);
        if (last_dim(ctx.input(0)) % 2 != 0) ctx.fail("the last dimension of {} must be even", ctx.input_label(0));
        Shape shape = ctx.input(0).shape;
        shape.back() /= 2;
        return std::vector<TensorType>{{ctx.input(0).dtype, shape}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        return {ctx.op("swiglu_fused_backward", {ctx.output_grad(0), ctx.input(0)})};
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t width = last_dim(ctx.inputs[0]) / 2, rows = ctx.inputs[0].numel() / (2 * width);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            swiglu_fused_forward(args.inputs[0].as<T>(), rows, width, args.outputs[0].as<T>());
          };
        });
      },
      // fp32 elementwise math, one bf16 rounding: 4e-3 (tests/cuda/test_elementwise.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 4e-3},
  });
  registry.add(OpDef{
      .name = "swiglu_fused_backward",
      .inputs = {"d_out", "gate_up"},
      .outputs = {"d_gate_up"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(1);
        ctx.expect_min_rank(1, 1);
        Shape shape = ctx.input(1).shape;
        if (shape.back() % 2 != 0) ctx.fail("the last dimension of {} must be even", ctx.input_label(1));
        shape.back() /= 2;
        if (ctx.input(0) != TensorType{ctx.input(1).dtype, shape}) {
          ctx.fail("{} must be {}", ctx.input_label(0), format_type({ctx.input(1).dtype, shape}));
        }
        return std::vector<TensorType>{ctx.input(1)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t width = last_dim(ctx.inputs[1]) / 2, rows = ctx.inputs[1].numel() / (2 * width);
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            swiglu_fused_backward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), rows, width, args.outputs[0].as<T>());
          };
        });
      },
      // fp32 elementwise math, one bf16 rounding: 4e-3 (tests/cuda/test_elementwise.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 4e-3},
  });
}

}  // namespace

void register_swiglu_ops(OpRegistry& registry) {
  register_swiglu(registry);
  register_swiglu_fused(registry);
}

}  // namespace surogate::ops::defs
