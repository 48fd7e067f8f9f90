// Graph ops "rmsnorm" and "fused_residual_rmsnorm" with their backward ops, over
// ops/rmsnorm.h. rmsnorm normalises groups of weight.size() values: x [..., k·D] with weight [D]
// is k rows per token (Qwen3's per-head q/k norm on a flat [B, T, H·Dh] projection).
// rstd [rows] is an extra forward output so the planner can save or recompute it. Backward ops
// zero-fill d_weight before the math accumulates into it; with the attribute weight_grad false
// (the weight is frozen: LoRA) they have no d_weight output and skip that reduction.
#include "ops/defs/def_util.h"
#include "ops/defs/norm_weight_grad.h"
#include "ops/defs/statistic_dtype.h"
#include "ops/rmsnorm.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

// Checks x (index x_index) against weight (index w_index) and returns the row count.
int64_t norm_rows(const InferContext& ctx, size_t x_index, size_t w_index) {
  ctx.expect_floating(x_index);
  ctx.expect_rank(w_index, 1);
  if (ctx.input(w_index).dtype != ctx.input(x_index).dtype) {
    ctx.fail("{} must have the dtype of {}", ctx.input_label(w_index), ctx.input_label(x_index));
  }
  int64_t dim = ctx.input(w_index).shape[0];
  if (dim <= 0 || ctx.input(x_index).shape.empty() || last_dim(ctx.input(x_index)) % dim != 0) {
    ctx.fail("the last dimension of {} must be a multiple of the size of {}", ctx.input_label(x_index),
             ctx.input_label(w_index));
  }
  return ctx.input(x_index).numel() / dim;
}

void register_rmsnorm(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "rmsnorm",
      .inputs = {"x", "weight"},
      .outputs = {"out", "rstd"},
      .infer = [](const InferContext& ctx) {
        norm_eps_attr(ctx.attrs);
        int64_t rows = norm_rows(ctx, 0, 1);
        return std::vector<TensorType>{ctx.input(0), {statistic_dtype(ctx.input(0).dtype), Shape{rows}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        if (ctx.has_output_grad(1)) {
          fail_user("{}: the rstd output of rmsnorm is not differentiable; use only 'out'", ctx.attrs().where());
        }
        auto grads = ctx.op("rmsnorm_backward", {ctx.output_grad(0), ctx.input(0), ctx.input(1), ctx.output(1)},
                            weight_grad_attrs(ctx, 1));
        return {if_needed(ctx, 0, grads[0]), weight_gradient(ctx, 1, grads)};
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t dim = ctx.inputs[1].shape[0], rows = ctx.inputs[0].numel() / dim;
        double eps = norm_eps_attr(ctx.attrs);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            rmsnorm_forward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), rows, dim, eps, args.outputs[0].as<T>(),
                            args.outputs[1].as<T>());
          };
        });
      },
      // rstd 1e-5, out / d_x / d_weight 1e-2 (test_model_kernels.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "rmsnorm_backward",
      .inputs = {"d_out", "x", "weight", "rstd"},
      .outputs = {"d_x", "d_weight"},
      .infer = [](const InferContext& ctx) {
        int64_t rows = norm_rows(ctx, 1, 2);
        ctx.expect_same_type(0, 1);
        if (ctx.input(3) != TensorType{statistic_dtype(ctx.input(1).dtype), Shape{rows}}) {
          ctx.fail("{} must be {}", ctx.input_label(3), format_type({statistic_dtype(ctx.input(1).dtype), Shape{rows}}));
        }
        return backward_types(ctx, ctx.input(1), ctx.input(2));
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t dim = ctx.inputs[2].shape[0], rows = ctx.inputs[1].numel() / dim;
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            T* d_weight = weight_gradient_out<T>(args);
            rmsnorm_backward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(),
                             args.inputs[3].as<T>(), rows, dim, args.outputs[0].as<T>(), d_weight);
          };
        });
      },
      // rstd 1e-5, out / d_x / d_weight 1e-2 (test_model_kernels.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
}

// fused_residual_rmsnorm(residual_in, x, weight){eps} -> (out = rmsnorm(residual_out),
// residual_out = residual_in + x, rstd). `out` comes first, as in rmsnorm, so the node's name is
// the normalised tensor's (the decoder's "layers.N.ln2", "final_norm") and the residual stream is
// "<name>.residual_out".
void register_fused_residual_rmsnorm(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "fused_residual_rmsnorm",
      .inputs = {"residual_in", "x", "weight"},
      .outputs = {"out", "residual_out", "rstd"},
      .infer = [](const InferContext& ctx) {
        norm_eps_attr(ctx.attrs);
        ctx.expect_same_type(0, 1);
        int64_t rows = norm_rows(ctx, 0, 2);
        return std::vector<TensorType>{ctx.input(0), ctx.input(0), {statistic_dtype(ctx.input(0).dtype), Shape{rows}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        if (ctx.has_output_grad(2)) {
          fail_user("{}: the rstd output of fused_residual_rmsnorm is not differentiable", ctx.attrs().where());
        }
        std::vector<TensorId> inputs{ctx.output_grad(0), ctx.output(1), ctx.input(2), ctx.output(2)};
        if (ctx.has_output_grad(1)) inputs.push_back(ctx.output_grad(1));
        auto grads = ctx.op("fused_residual_rmsnorm_backward", inputs, weight_grad_attrs(ctx, 2));
        return {if_needed(ctx, 0, grads[0]), if_needed(ctx, 1, grads[0]), weight_gradient(ctx, 2, grads)};
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t dim = ctx.inputs[2].shape[0], rows = ctx.inputs[0].numel() / dim;
        double eps = norm_eps_attr(ctx.attrs);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            fused_residual_rmsnorm_forward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(), rows,
                                           dim, eps, args.outputs[1].as<T>(), args.outputs[0].as<T>(),
                                           args.outputs[2].as<T>());
          };
        });
      },
      // out 1e-2; rstd 4e-3: the CUDA kernel normalises the residual_out it stores, rounded to bf16
      // (≤ 2^-9 relative), while the CPU normalises the exact sum (test_model_kernels.cpp compares
      // the kernel with the norm of the rounded stream at 1e-5)
      .backend_tolerance = graph::BackendTolerance{.f32 = 4e-3, .bf16 = 1e-2},
  });
  // (d_out, residual_out, weight, rstd [, d_residual_out]) -> (d_input, d_weight); d_input is the
  // gradient of both residual_in and x.
  registry.add(OpDef{
      .name = "fused_residual_rmsnorm_backward",
      .inputs = {"d_out", "residual_out", "weight", "rstd", "d_residual_out"},
      .outputs = {"d_input", "d_weight"},
      .infer = [](const InferContext& ctx) {
        if (ctx.input_count() != 4 && ctx.input_count() != 5) {
          ctx.fail("takes d_out, residual_out, weight, rstd and an optional d_residual_out, got {} inputs",
                   ctx.input_count());
        }
        int64_t rows = norm_rows(ctx, 1, 2);
        ctx.expect_same_type(0, 1);
        if (ctx.input_count() == 5) ctx.expect_same_type(4, 1);
        if (ctx.input(3) != TensorType{statistic_dtype(ctx.input(1).dtype), Shape{rows}}) {
          ctx.fail("{} must be {}", ctx.input_label(3), format_type({statistic_dtype(ctx.input(1).dtype), Shape{rows}}));
        }
        return backward_types(ctx, ctx.input(1), ctx.input(2));
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t dim = ctx.inputs[2].shape[0], rows = ctx.inputs[1].numel() / dim;
        bool has_residual_grad = ctx.inputs.size() == 5;
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            T* d_weight = weight_gradient_out<T>(args);
            fused_residual_rmsnorm_backward(args.inputs[0].as<T>(), has_residual_grad ? args.inputs[4].as<T>() : nullptr,
                                            args.inputs[1].as<T>(), args.inputs[2].as<T>(), args.inputs[3].as<T>(),
                                            rows, dim, args.outputs[0].as<T>(), d_weight);
          };
        });
      },
      .variadic_inputs = true,
      // rstd 1e-5, out / d_x / d_weight 1e-2 (test_model_kernels.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
}

}  // namespace

void register_rmsnorm_ops(OpRegistry& registry) {
  register_rmsnorm(registry);
  register_fused_residual_rmsnorm(registry);
}

}  // namespace surogate::ops::defs
