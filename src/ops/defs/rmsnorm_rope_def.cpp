// Graph ops for Qwen3's per-head q/k RMSNorm fused with RoPE, over ops/rmsnorm_rope.h:
//   fused_rmsnorm_rope(x [..., H·D], weight [D], position_ids I32 [...]) -> out (x's type), rstd [tokens·H]
//     attrs: heads, head_dim, eps, inv_freq (list of rotary_dim / 2 numbers), attention_scaling (1)
//   fused_rmsnorm_rope_backward(d_out, x, weight, rstd, position_ids) -> d_x, d_weight (same attrs;
//     with weight_grad false, for a frozen weight, d_x only: norm_weight_grad.h)
//   fused_qk_rmsnorm_rope(q, q_weight, k, k_weight, position_ids) -> q_out, q_rstd, k_out, k_rstd:
//     a layer's two forwards as one node (attrs heads = q's, kv_heads = k's; a decode step's)
// The rotation's cos/sin come from inv_freq and the position ids inside the op (what the CUDA
// kernel computes in registers), so no table tensor is read; the decoder passes the frequencies it
// gives rope_cos_sin, and on the CPU the op equals rmsnorm → rope_cos_sin → rope bit for bit.
// position_ids holds one id per token of x (tokens = x.numel() / (H·D)). rstd is an extra output
// for the backward (not differentiable); the backward zero-fills d_weight before accumulating.
#include "ops/defs/def_util.h"
#include "ops/defs/inverse_frequency_attr.h"
#include "ops/defs/norm_weight_grad.h"
#include "ops/defs/statistic_dtype.h"
#include "ops/rmsnorm_rope.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

// Checks x (x_index), weight, rstd (when rstd_index >= 0) and position_ids against the attrs.
RmsnormRopeShape norm_rope_shape(const InferContext& ctx, size_t x_index, size_t weight_index, int rstd_index,
                                 size_t positions_index) {
  ctx.expect_floating(x_index);
  ctx.expect_rank(weight_index, 1);
  if (ctx.input(weight_index).dtype != ctx.input(x_index).dtype) {
    ctx.fail("{} must have the dtype of {}", ctx.input_label(weight_index), ctx.input_label(x_index));
  }
  RmsnormRopeShape shape;
  shape.heads = ctx.attrs.integer("heads");
  shape.head_dim = ctx.attrs.integer("head_dim");
  if (shape.heads <= 0 || shape.head_dim <= 0) ctx.fail("attributes 'heads' and 'head_dim' must be positive");
  double eps = ctx.attrs.number("eps");
  if (!(eps >= 0.0)) ctx.fail("attribute 'eps' must be non-negative, got {}", eps);
  const int64_t rotary_dim = 2 * static_cast<int64_t>(inverse_frequency_attr(ctx.attrs).size());
  if (rotary_dim > shape.head_dim) {
    ctx.fail("rotary_dim {} (2 · the length of inv_freq) exceeds head_dim {}", rotary_dim, shape.head_dim);
  }
  ctx.expect_min_rank(x_index, 1);
  ctx.expect_dim(x_index, -1, shape.heads * shape.head_dim);
  ctx.expect_dim(weight_index, 0, shape.head_dim);
  shape.tokens = ctx.input(x_index).numel() / (shape.heads * shape.head_dim);
  ctx.expect_dtype(positions_index, DType::I32);
  if (ctx.input(positions_index).numel() != shape.tokens) {
    ctx.fail("{} must hold one position per token of {} ({} tokens)", ctx.input_label(positions_index),
             ctx.input_label(x_index), shape.tokens);
  }
  if (rstd_index >= 0) {
    const TensorType rstd{statistic_dtype(ctx.input(x_index).dtype), Shape{shape.tokens * shape.heads}};
    if (ctx.input(static_cast<size_t>(rstd_index)) != rstd) {
      ctx.fail("{} must be {}", ctx.input_label(static_cast<size_t>(rstd_index)), format_type(rstd));
    }
  }
  return shape;
}

RmsnormRopeShape bound_shape(const CpuBindContext& ctx, bool backward) {
  std::vector<std::string> names = backward ? std::vector<std::string>{"d_out", "x", "weight", "rstd", "position_ids"}
                                            : std::vector<std::string>{"x", "weight", "position_ids"};
  InferContext infer(ctx.node.op, ctx.attrs.where(), ctx.inputs, names, ctx.node.attrs);
  return backward ? norm_rope_shape(infer, 1, 2, 3, 4) : norm_rope_shape(infer, 0, 1, -1, 2);
}

void register_rmsnorm_rope(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "fused_rmsnorm_rope",
      .inputs = {"x", "weight", "position_ids"},
      .outputs = {"out", "rstd"},
      .infer = [](const InferContext& ctx) {
        RmsnormRopeShape shape = norm_rope_shape(ctx, 0, 1, -1, 2);
        return std::vector<TensorType>{ctx.input(0),
                                       {statistic_dtype(ctx.input(0).dtype), Shape{shape.tokens * shape.heads}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        if (ctx.has_output_grad(1)) {
          fail_user("{}: the rstd output of fused_rmsnorm_rope is not differentiable; use only 'out'", ctx.attrs().where());
        }
        auto grads = ctx.op("fused_rmsnorm_rope_backward",
                            {ctx.output_grad(0), ctx.input(0), ctx.input(1), ctx.output(1), ctx.input(2)},
                            weight_grad_attrs(ctx, 1, ctx.attrs().raw()));
        return {if_needed(ctx, 0, grads[0]), weight_gradient(ctx, 1, grads), std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) {
        const RmsnormRopeShape shape = bound_shape(ctx, false);
        const double eps = ctx.attrs.number("eps");
        return bind_floating(ctx, ctx.inputs[0].dtype, [&](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [shape, eps, frequencies = frequencies_from_attrs<T>(ctx.attrs)](const CpuKernelArgs& args) {
            rmsnorm_rope_forward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), frequencies,
                                 args.inputs[2].as<int32_t>(), shape, eps, args.outputs[0].as<T>(), args.outputs[1].as<T>());
          };
        });
      },
      // rstd 1e-5, out / d_x / d_weight 1e-2 (test_model_kernels.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "fused_rmsnorm_rope_backward",
      .inputs = {"d_out", "x", "weight", "rstd", "position_ids"},
      .outputs = {"d_x", "d_weight"},
      .infer = [](const InferContext& ctx) {
        norm_rope_shape(ctx, 1, 2, 3, 4);
        ctx.expect_same_type(0, 1);
        return backward_types(ctx, ctx.input(1), ctx.input(2));
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const RmsnormRopeShape shape = bound_shape(ctx, true);
        return bind_floating(ctx, ctx.inputs[1].dtype, [&](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [shape, frequencies = frequencies_from_attrs<T>(ctx.attrs)](const CpuKernelArgs& args) {
            T* d_weight = weight_gradient_out<T>(args);
            rmsnorm_rope_backward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(),
                                  args.inputs[3].as<T>(), frequencies, args.inputs[4].as<int32_t>(), shape,
                                  args.outputs[0].as<T>(), d_weight);
          };
        });
      },
      // rstd 1e-5, out / d_x / d_weight 1e-2 (test_model_kernels.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
}

// The attrs of k in a pair: the pair's with heads = kv_heads.
nlohmann::json k_attrs(const Attrs& attrs) {
  nlohmann::json k = attrs.raw();
  k["heads"] = attrs.integer("kv_heads");
  return k;
}

// fused_qk_rmsnorm_rope (q, q_weight, k, k_weight, position_ids) -> q_out, q_rstd, k_out, k_rstd:
// the two fused_rmsnorm_rope of one attention layer as one node (attrs: fused_rmsnorm_rope's with
// heads = q's heads, and kv_heads = k's); generate/decode_fusion.h makes it, a CUDA decode step
// runs it in one launch (cuda/kernels/qk_norm_rope.h's pair). Forward only.
void register_qk_rmsnorm_rope(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "fused_qk_rmsnorm_rope",
      .inputs = {"q", "q_weight", "k", "k_weight", "position_ids"},
      .outputs = {"q_out", "q_rstd", "k_out", "k_rstd"},
      .infer = [](const InferContext& ctx) {
        const RmsnormRopeShape q = norm_rope_shape(ctx, 0, 1, -1, 4);
        const std::vector<TensorType> k_inputs{ctx.input(2), ctx.input(3), ctx.input(4)};
        const std::vector<std::string> k_names{"k", "k_weight", "position_ids"};
        const nlohmann::json attrs = k_attrs(ctx.attrs);
        const RmsnormRopeShape k =
            norm_rope_shape(InferContext("fused_qk_rmsnorm_rope", ctx.where(), k_inputs, k_names, attrs), 0, 1, -1, 2);
        const DType rstd = statistic_dtype(ctx.input(0).dtype);
        return std::vector<TensorType>{ctx.input(0), {rstd, Shape{q.tokens * q.heads}}, ctx.input(2),
                                       {rstd, Shape{k.tokens * k.heads}}};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const std::vector<std::string> names{"q", "q_weight", "k", "k_weight", "position_ids"};
        const RmsnormRopeShape q =
            norm_rope_shape(InferContext(ctx.node.op, ctx.attrs.where(), ctx.inputs, names, ctx.node.attrs), 0, 1, -1, 4);
        RmsnormRopeShape k = q;
        k.heads = ctx.attrs.integer("kv_heads");
        const double eps = ctx.attrs.number("eps");
        return bind_floating(ctx, ctx.inputs[0].dtype, [&](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [q, k, eps, frequencies = frequencies_from_attrs<T>(ctx.attrs)](const CpuKernelArgs& args) {
            rmsnorm_rope_forward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), frequencies,
                                 args.inputs[4].as<int32_t>(), q, eps, args.outputs[0].as<T>(), args.outputs[1].as<T>());
            rmsnorm_rope_forward(args.inputs[2].as<T>(), args.inputs[3].as<T>(), frequencies,
                                 args.inputs[4].as<int32_t>(), k, eps, args.outputs[2].as<T>(), args.outputs[3].as<T>());
          };
        });
      },
      // fused_rmsnorm_rope's: rstd 1e-5, out 1e-2
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
}

}  // namespace

void register_rmsnorm_rope_ops(OpRegistry& registry) {
  register_rmsnorm_rope(registry);
  register_qk_rmsnorm_rope(registry);
}

}  // namespace surogate::ops::defs
