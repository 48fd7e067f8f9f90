// Graph ops "layernorm" and "layernorm_backward", over ops/layernorm.h.
//   layernorm(x, weight [, bias]){eps} -> out (x's type), mean, rstd [rows]
//     x [..., D], weight and bias [D]; mean / rstd are extra outputs (statistic dtype: F32 for
//     16-bit graphs) so the planner can save or recompute them, as rmsnorm's rstd.
//   layernorm_backward(d_out, x, weight, mean, rstd){weight_grad, bias_grad} -> d_x [, d_weight] [, d_bias]
//     d_weight is an output unless weight_grad is false (a frozen weight: LoRA), d_bias only when
//     bias_grad is true (the forward had a bias that needs a gradient). Both are zero-filled, then
//     accumulated by the math.
#include "ops/defs/def_util.h"
#include "ops/defs/norm_weight_grad.h"
#include "ops/defs/statistic_dtype.h"
#include "ops/layernorm.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

// x (index 1 in the backward, 0 in the forward) against weight [D] with D its last dimension;
// returns the row count.
int64_t layernorm_rows(const InferContext& ctx, size_t x_index, size_t weight_index) {
  ctx.expect_floating(x_index);
  ctx.expect_min_rank(x_index, 1);
  ctx.expect_rank(weight_index, 1);
  if (ctx.input(weight_index).dtype != ctx.input(x_index).dtype) {
    ctx.fail("{} must have the dtype of {}", ctx.input_label(weight_index), ctx.input_label(x_index));
  }
  if (ctx.input(weight_index).shape[0] != last_dim(ctx.input(x_index))) {
    ctx.fail("{} must have the size of the last dimension of {}", ctx.input_label(weight_index),
             ctx.input_label(x_index));
  }
  return ctx.input(x_index).numel() / last_dim(ctx.input(x_index));
}

bool bias_grad_attr(const Attrs& attrs) { return attrs.boolean_or("bias_grad", false); }

// T* of the backward's optional outputs: d_weight (when weight_grad) then d_bias (when bias_grad),
// zero-filled; null where absent.
template <typename T>
std::pair<T*, T*> parameter_gradients_out(const CpuKernelArgs& args, bool weight_grad, bool bias_grad) {
  size_t next = 1;
  T* d_weight = nullptr;
  T* d_bias = nullptr;
  if (weight_grad) {
    zero_fill(args.outputs[next]);
    d_weight = args.outputs[next++].as<T>();
  }
  if (bias_grad) {
    zero_fill(args.outputs[next]);
    d_bias = args.outputs[next].as<T>();
  }
  return {d_weight, d_bias};
}

void register_layernorm(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "layernorm",
      .inputs = {"x", "weight", "bias"},
      .outputs = {"out", "mean", "rstd"},
      .infer = [](const InferContext& ctx) {
        if (ctx.input_count() != 2 && ctx.input_count() != 3) {
          ctx.fail("takes x, weight and an optional bias, got {} inputs", ctx.input_count());
        }
        norm_eps_attr(ctx.attrs);
        const int64_t rows = layernorm_rows(ctx, 0, 1);
        if (ctx.input_count() == 3) ctx.expect_same_type(2, 1);
        const TensorType statistic{statistic_dtype(ctx.input(0).dtype), Shape{rows}};
        return std::vector<TensorType>{ctx.input(0), statistic, statistic};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        if (ctx.has_output_grad(1) || ctx.has_output_grad(2)) {
          fail_user("{}: the mean and rstd outputs of layernorm are not differentiable; use only 'out'",
                    ctx.attrs().where());
        }
        const bool has_bias = ctx.node().inputs.size() == 3;
        nlohmann::json attrs = weight_grad_attrs(ctx, 1);
        const bool bias_grad = has_bias && ctx.needs_input_grad(2);
        if (bias_grad) attrs["bias_grad"] = true;
        auto grads = ctx.op("layernorm_backward",
                            {ctx.output_grad(0), ctx.input(0), ctx.input(1), ctx.output(1), ctx.output(2)}, attrs);
        InputGradients result{if_needed(ctx, 0, grads[0]), weight_gradient(ctx, 1, grads)};
        if (has_bias) {
          const size_t bias_index = ctx.needs_input_grad(1) ? 2 : 1;
          result.push_back(bias_grad ? std::optional<TensorId>(grads[bias_index]) : std::nullopt);
        }
        return result;
      },
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t dim = ctx.inputs[1].shape[0], rows = ctx.inputs[0].numel() / dim;
        const double eps = norm_eps_attr(ctx.attrs);
        const bool has_bias = ctx.inputs.size() == 3;
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            layernorm_forward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), has_bias ? args.inputs[2].as<T>() : nullptr,
                              rows, dim, eps, args.outputs[0].as<T>(), args.outputs[1].as<T>(),
                              args.outputs[2].as<T>());
          };
        });
      },
      .variadic_inputs = true,
      // bf16 in / out with fp32 row and column sums: 1e-2; mean and rstd (F32) 1e-4
      // (tests/runtime_cuda/test_gelu_layernorm_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "layernorm_backward",
      .inputs = {"d_out", "x", "weight", "mean", "rstd"},
      .outputs = {"d_x", "d_weight", "d_bias"},
      .infer = [](const InferContext& ctx) {
        const int64_t rows = layernorm_rows(ctx, 1, 2);
        ctx.expect_same_type(0, 1);
        const TensorType statistic{statistic_dtype(ctx.input(1).dtype), Shape{rows}};
        for (size_t index : {size_t{3}, size_t{4}}) {
          if (ctx.input(index) != statistic) ctx.fail("{} must be {}", ctx.input_label(index), format_type(statistic));
        }
        std::vector<TensorType> types{ctx.input(1)};
        if (weight_grad_attr(ctx.attrs)) types.push_back(ctx.input(2));
        if (bias_grad_attr(ctx.attrs)) types.push_back(ctx.input(2));
        return types;
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t dim = ctx.inputs[2].shape[0], rows = ctx.inputs[1].numel() / dim;
        const bool weight_grad = weight_grad_attr(ctx.attrs), bias_grad = bias_grad_attr(ctx.attrs);
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            auto [d_weight, d_bias] = parameter_gradients_out<T>(args, weight_grad, bias_grad);
            layernorm_backward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(),
                               args.inputs[3].as<T>(), args.inputs[4].as<T>(), rows, dim, args.outputs[0].as<T>(),
                               d_weight, d_bias);
          };
        });
      },
      // bf16 in / out with fp32 row and column sums: 1e-2; mean and rstd (F32) 1e-4
      // (tests/runtime_cuda/test_gelu_layernorm_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1e-2},
  });
}

}  // namespace

void register_layernorm_ops(OpRegistry& registry) { register_layernorm(registry); }

}  // namespace surogate::ops::defs
