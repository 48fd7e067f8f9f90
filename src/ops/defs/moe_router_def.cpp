// Graph ops of the MoE router and its load-balancing loss, over ops/moe_routing.h:
//   router_topk(logits [..., E]){top_k, normalize} -> (weights [..., k], indices I32 [..., k],
//       probs [..., E]); weights and probs in the statistic dtype (F32 in bf16 graphs).
//   router_topk_backward(d_weights, probs, indices, weights[, d_probs]){normalize, logits_dtype}
//       -> d_logits (in logits_dtype: BF16 in bf16 graphs, where the probabilities are F32)
//   router_statistics(probs [..., E], indices [..., k]) -> (probability_sum [E], counts [E])
//   router_statistics_backward(d_probability_sum [E], probs) -> d_probs (every row gets d_sum)
//   router_aux_loss(probability_sum [E], counts [E]){scale} -> scale · Σ_e counts_e · probability_sum_e
//   router_aux_loss_backward(d_loss [], counts [E]){scale} -> d_probability_sum = scale · d_loss · counts
// transformers' load_balancing_loss_func sums the counts and probabilities of every MoE layer
// before multiplying: aux = E · Σ_e (C_e / (L·N)) · (P_e / (L·N)). The decoder builder adds the
// layers' statistics with `add` and sets scale = E / (L·N)² (models/moe_block.h). Counts carry no
// gradient (top-k is piecewise constant), as in torch.
#include "ops/defs/def_util.h"
#include "ops/defs/statistic_dtype.h"
#include "ops/moe_routing.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

int64_t top_k_attr(const Attrs& attrs, int64_t experts) {
  const int64_t top_k = attrs.integer("top_k");
  if (top_k < 1 || top_k > experts) {
    fail_user("{}: attribute 'top_k' must be in [1, {}] (the experts), got {}", attrs.where(), experts, top_k);
  }
  return top_k;
}

Shape with_last(Shape shape, int64_t last) {
  shape.back() = last;
  return shape;
}

// probs [..., E] and indices I32 [..., k] over the same tokens.
void expect_routing(const InferContext& ctx, size_t probs, size_t indices) {
  ctx.expect_floating(probs);
  ctx.expect_min_rank(probs, 1);
  ctx.expect_dtype(indices, DType::I32);
  ctx.expect_min_rank(indices, 1);
  if (Shape(ctx.input(probs).shape.begin(), ctx.input(probs).shape.end() - 1) !=
      Shape(ctx.input(indices).shape.begin(), ctx.input(indices).shape.end() - 1)) {
    ctx.fail("{} and {} must cover the same tokens", ctx.input_label(probs), ctx.input_label(indices));
  }
}

void register_router_topk(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "router_topk",
      .inputs = {"logits"},
      .outputs = {"weights", "indices", "probs"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        ctx.expect_min_rank(0, 1);
        const TensorType& logits = ctx.input(0);
        const int64_t top_k = top_k_attr(ctx.attrs, last_dim(logits));
        const DType statistic = statistic_dtype(logits.dtype);
        return std::vector<TensorType>{{statistic, with_last(logits.shape, top_k)},
                                       {DType::I32, with_last(logits.shape, top_k)},
                                       {statistic, logits.shape}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        std::vector<TensorId> inputs{ctx.output_grad(0), ctx.output(2), ctx.output(1), ctx.output(0)};
        if (ctx.has_output_grad(2)) inputs.push_back(ctx.output_grad(2));
        return {ctx.op("router_topk_backward", inputs,
                       {{"normalize", ctx.attrs().boolean_or("normalize", false)},
                        {"logits_dtype", std::string(dtype_safetensors_name(ctx.type(ctx.input(0)).dtype))}})};
      },
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t experts = last_dim(ctx.inputs[0]), tokens = ctx.inputs[0].numel() / experts;
        const int64_t top_k = top_k_attr(ctx.attrs, experts);
        const bool normalize = ctx.attrs.boolean_or("normalize", false);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            router_topk_forward(args.inputs[0].as<T>(), tokens, experts, top_k, normalize, args.outputs[0].as<T>(),
                                args.outputs[1].as<int32_t>(), args.outputs[2].as<T>());
          };
        });
      },
      // router probabilities / statistics / aux loss 1e-5, bf16 outputs 1e-2 (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "router_topk_backward",
      .inputs = {"d_weights", "probs", "indices", "weights", "d_probs"},
      .outputs = {"d_logits"},
      .infer = [](const InferContext& ctx) {
        if (ctx.input_count() != 4 && ctx.input_count() != 5) {
          ctx.fail("router_topk_backward takes d_weights, probs, indices, weights and an optional d_probs");
        }
        expect_routing(ctx, 1, 2);
        ctx.expect_same_type(0, 3);
        if (ctx.input(3).shape != ctx.input(2).shape) ctx.fail("{} must have the shape of the indices", ctx.input_label(3));
        if (ctx.input_count() == 5) ctx.expect_same_type(4, 1);
        // The logits' dtype: the probabilities' unless the graph is low-precision (bf16 logits,
        // F32 probabilities); the gradient rule reads it from the forward node.
        DType dtype = ctx.input(1).dtype;
        if (ctx.attrs.has("logits_dtype")) {
          const std::optional<DType> given = dtype_from_safetensors_name(ctx.attrs.string("logits_dtype"));
          if (!given || statistic_dtype(*given) != ctx.input(1).dtype) {
            ctx.fail("attribute 'logits_dtype' must name a floating dtype whose statistics are {}",
                     dtype_safetensors_name(ctx.input(1).dtype));
          }
          dtype = *given;
        }
        return std::vector<TensorType>{{dtype, ctx.input(1).shape}};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t experts = last_dim(ctx.inputs[1]), tokens = ctx.inputs[1].numel() / experts;
        const int64_t top_k = last_dim(ctx.inputs[2]);
        const bool normalize = ctx.attrs.boolean_or("normalize", false), with_probs = ctx.inputs.size() == 5;
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            router_topk_backward(args.inputs[0].as<T>(), with_probs ? args.inputs[4].as<T>() : nullptr,
                                 args.inputs[1].as<T>(), args.inputs[2].as<int32_t>(), args.inputs[3].as<T>(), tokens,
                                 experts, top_k, normalize, args.outputs[0].as<T>());
          };
        });
      },
      .variadic_inputs = true,  // d_probs is optional (no router loss),
      // router probabilities / statistics / aux loss 1e-5, bf16 outputs 1e-2 (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
}

void register_router_statistics(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "router_statistics",
      .inputs = {"probs", "indices"},
      .outputs = {"probability_sum", "counts"},
      .infer = [](const InferContext& ctx) {
        expect_routing(ctx, 0, 1);
        const TensorType sums{ctx.input(0).dtype, Shape{last_dim(ctx.input(0))}};
        return std::vector<TensorType>{sums, sums};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        if (ctx.has_output_grad(1)) fail_user("{}: the counts of router_statistics are not differentiable", ctx.attrs().where());
        return {ctx.op("router_statistics_backward", {ctx.output_grad(0), ctx.input(0)}), std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t experts = last_dim(ctx.inputs[0]), tokens = ctx.inputs[0].numel() / experts;
        const int64_t top_k = last_dim(ctx.inputs[1]);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            router_statistics(args.inputs[0].as<T>(), args.inputs[1].as<int32_t>(), tokens, experts, top_k,
                              args.outputs[0].as<T>(), args.outputs[1].as<T>());
          };
        });
      },
      // router probabilities / statistics / aux loss 1e-5, bf16 outputs 1e-2 (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "router_statistics_backward",
      .inputs = {"d_probability_sum", "probs"},
      .outputs = {"d_probs"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(1);
        ctx.expect_min_rank(1, 1);
        if (ctx.input(0) != TensorType{ctx.input(1).dtype, Shape{last_dim(ctx.input(1))}}) {
          ctx.fail("{} must be {}", ctx.input_label(0), format_type({ctx.input(1).dtype, Shape{last_dim(ctx.input(1))}}));
        }
        return std::vector<TensorType>{ctx.input(1)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t experts = last_dim(ctx.inputs[1]), tokens = ctx.inputs[1].numel() / experts;
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            const T* sums = args.inputs[0].as<T>();
            T* out = args.outputs[0].as<T>();
            for (int64_t t = 0; t < tokens; ++t) std::copy(sums, sums + experts, out + t * experts);
          };
        });
      },
      // router probabilities / statistics / aux loss 1e-5, bf16 outputs 1e-2 (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
}

void register_router_aux_loss(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "router_aux_loss",
      .inputs = {"probability_sum", "counts"},
      .outputs = {"loss"},
      .infer = [](const InferContext& ctx) {
        ctx.attrs.number("scale");
        ctx.expect_floating(0);
        ctx.expect_rank(0, 1);
        ctx.expect_same_type(0, 1);
        return std::vector<TensorType>{{ctx.input(0).dtype, Shape{}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        return {ctx.op("router_aux_loss_backward", {ctx.output_grad(0), ctx.input(1)},
                       {{"scale", ctx.attrs().number("scale")}}),
                std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t experts = ctx.inputs[0].shape[0];
        const double scale = ctx.attrs.number("scale");
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            const T* sums = args.inputs[0].as<T>();
            const T* counts = args.inputs[1].as<T>();
            T total = 0;
            for (int64_t e = 0; e < experts; ++e) total += counts[e] * sums[e];
            args.outputs[0].as<T>()[0] = static_cast<T>(scale) * total;
          };
        });
      },
      // router probabilities / statistics / aux loss 1e-5, bf16 outputs 1e-2 (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "router_aux_loss_backward",
      .inputs = {"d_loss", "counts"},
      .outputs = {"d_probability_sum"},
      .infer = [](const InferContext& ctx) {
        ctx.attrs.number("scale");
        ctx.expect_floating(1);
        ctx.expect_rank(1, 1);
        if (ctx.input(0) != TensorType{ctx.input(1).dtype, Shape{}}) ctx.fail("{} must be a scalar", ctx.input_label(0));
        return std::vector<TensorType>{ctx.input(1)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t experts = ctx.inputs[1].shape[0];
        const double scale = ctx.attrs.number("scale");
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            const T factor = static_cast<T>(scale) * args.inputs[0].as<T>()[0];
            const T* counts = args.inputs[1].as<T>();
            T* out = args.outputs[0].as<T>();
            for (int64_t e = 0; e < experts; ++e) out[e] = factor * counts[e];
          };
        });
      },
      // router probabilities / statistics / aux loss 1e-5, bf16 outputs 1e-2 (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
}

}  // namespace

void register_moe_router_ops(OpRegistry& registry) {
  register_router_topk(registry);
  register_router_statistics(registry);
  register_router_aux_loss(registry);
}

}  // namespace surogate::ops::defs
