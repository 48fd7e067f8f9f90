// Graph ops for the LM head + token cross-entropy, over ops/cross_entropy.h (chunked logits,
// labels already shifted, rows labelled ignore_index add nothing).
//
// Loss convention (token-weighted mean that survives gradient accumulation):
//   lm_head_cross_entropy(hidden [..., D], weight [V, D], labels I32 [...]){chunks, ignore_index}
//     -> loss_sum [] (Σ token losses), valid_tokens [] (count of scored rows, as a float of
//        hidden's dtype, not differentiable), logsumexp [N] (saved for backward).
//   The graph multiplies loss_sum by a scalar input (mul(loss_sum, loss_scale)) and the trainer
//   writes loss_scale = 1 / (valid tokens of the whole accumulation window): the seeded
//   gradient then reaches this op as d_loss_sum = loss_scale, every micro-batch's gradient is
//   already divided by the window's token count, and the accumulated gradients and summed
//   losses are exactly the window's token-weighted mean.
//   lm_head_cross_entropy_backward(hidden, weight, labels, logsumexp, d_loss_sum) -> d_hidden, d_weight.
// "lm_head_loss"(hidden, weight, targets, scale) -> (loss = scale·Σ, logsumexp) is the same
// convention with the scale folded in (the trainer's decoder builder uses it), with
// "lm_head_loss_backward"; "lm_head_accuracy" counts argmax hits (evaluation only).
// "lm_head_loss_with_input_grad"(hidden, weight, targets, scale) -> (loss, logsumexp, d_hidden) is
// lm_head_loss that also writes d_hidden = ∂loss/∂hidden in the same pass over the logits; its
// gradient is scale_by(d_hidden, d_loss). The compiler rewrites a training graph's lm_head_loss to
// it when the head weight is frozen (compiler/loss_input_grad.h), so the backward never
// recomputes the logits. Its weight must not need a gradient.
// "lm_head_loss_with_grads"(hidden, weight, targets, scale) -> (loss, logsumexp, d_hidden, d_weight)
// is the trainable-head form (full fine-tuning), to which the compiler rewrites lm_head_loss when
// the head weight is a trainable parameter: the same pass also writes d_weight = ∂loss/∂weight
// (weight's dtype and shape); its gradient is scale_by(d_hidden, d_loss) for hidden and
// scale_by(d_weight, d_loss) for the weight (both forms: the derivative itself when d_loss is
// autodiff's seed of 1), so a trainable head's backward does not recompute the logits either. With d_loss = 1 both are bit-identical to lm_head_loss_backward's.
// Token weights: lm_head_loss and its two rewritten forms take an optional fifth input,
// weights F32 [rows] (loss_scale strategies that weigh parts of a response; not differentiable),
// and lm_head_loss_backward the same as its seventh. Row n's loss and gradient are multiplied by
// weights[n]; the scale input is then 1 / Σ weights of the window (a weighted mean). Graphs
// without the input run exactly the unweighted kernels.
// Backward ops (and lm_head_loss_with_grads) zero-fill d_weight before the math accumulates into it.
#include <memory>
#include <vector>

#include "ops/cross_entropy.h"
#include "ops/defs/def_util.h"
#include "ops/defs/lm_head_inputs.h"
#include "ops/defs/statistic_dtype.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

// hidden (0), weight (1), labels (2): returns the row count.
int64_t check_loss_inputs(const InferContext& ctx) {
  const int64_t rows = check_lm_head_inputs(ctx);
  int64_t chunks = ctx.attrs.integer_or("chunks", 1);
  if (chunks < 1) ctx.fail("attribute 'chunks' must be at least 1, got {}", chunks);
  return rows;
}

void check_scalar(const InferContext& ctx, size_t index) {
  if (ctx.input(index) != TensorType{statistic_dtype(ctx.input(0).dtype), Shape{}}) {
    ctx.fail("{} must be a scalar {}[]", ctx.input_label(index), dtype_safetensors_name(statistic_dtype(ctx.input(0).dtype)));
  }
}

// The optional weights input at `index`: F32, one per row (any shape, like the labels). True when present.
bool check_token_weights(const InferContext& ctx, size_t index, int64_t rows) {
  if (ctx.input_count() == index) return false;
  if (ctx.input_count() != index + 1) {
    ctx.fail("takes {} inputs, or {} with token weights; got {}", index, index + 1, ctx.input_count());
  }
  if (ctx.input(index).dtype != DType::F32 || ctx.input(index).numel() != rows) {
    ctx.fail("{} (token weights) must be F32 with one value per row of {} ({} rows)", ctx.input_label(index),
             ctx.input_label(0), rows);
  }
  return true;
}

// The weights of a bound op whose weights input would be at `index`, or null.
const float* token_weights(const CpuKernelArgs& args, size_t index) {
  return args.inputs.size() > index ? args.inputs[index].as<const float>() : nullptr;
}

void check_logsumexp(const InferContext& ctx, size_t index, int64_t rows) {
  if (ctx.input(index) != TensorType{statistic_dtype(ctx.input(0).dtype), Shape{rows}}) {
    ctx.fail("{} must be {}", ctx.input_label(index), format_type({statistic_dtype(ctx.input(0).dtype), Shape{rows}}));
  }
}

CrossEntropyShape loss_shape(const CpuBindContext& ctx) {
  CrossEntropyShape shape;
  shape.vocab = ctx.inputs[1].shape[0];
  shape.hidden = ctx.inputs[1].shape[1];
  shape.rows = ctx.inputs[0].numel() / shape.hidden;
  shape.chunks = std::max<int64_t>(1, ctx.attrs.integer_or("chunks", 1));
  shape.ignore_index = static_cast<int32_t>(ctx.attrs.integer_or("ignore_index", kIgnoreIndex));
  return shape;
}

void register_cross_entropy(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "lm_head_cross_entropy",
      .inputs = {"hidden", "weight", "labels"},
      .outputs = {"loss_sum", "valid_tokens", "logsumexp"},
      .infer = [](const InferContext& ctx) {
        int64_t rows = check_loss_inputs(ctx);
        DType dtype = statistic_dtype(ctx.input(0).dtype);
        return std::vector<TensorType>{{dtype, Shape{}}, {dtype, Shape{}}, {dtype, Shape{rows}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        if (ctx.has_output_grad(2)) {
          fail_user("{}: the logsumexp output of lm_head_cross_entropy is not differentiable", ctx.attrs().where());
        }
        auto grads = ctx.op("lm_head_cross_entropy_backward",
                            {ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(2), ctx.output_grad(0)},
                            ctx.attrs().raw());
        return {if_needed(ctx, 0, grads[0]), if_needed(ctx, 1, grads[1]), std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) {
        CrossEntropyShape shape = loss_shape(ctx);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            CrossEntropyResult result = lm_head_cross_entropy_forward(
                shape, args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<int32_t>(), args.outputs[2].as<T>());
            args.outputs[0].as<T>()[0] = static_cast<T>(result.loss_sum);
            args.outputs[1].as<T>()[0] = static_cast<T>(result.valid_tokens);
          };
        });
      },
      // loss 1e-2, gradients 5e-2 (test_lm_head_grads_cuda.cpp, tests/cuda/test_loss.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 5e-2},
  });
  registry.add(OpDef{
      .name = "lm_head_cross_entropy_backward",
      .inputs = {"hidden", "weight", "labels", "logsumexp", "d_loss_sum"},
      .outputs = {"d_hidden", "d_weight"},
      .infer = [](const InferContext& ctx) {
        int64_t rows = check_loss_inputs(ctx);
        check_logsumexp(ctx, 3, rows);
        check_scalar(ctx, 4);
        return std::vector<TensorType>{ctx.input(0), ctx.input(1)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        CrossEntropyShape shape = loss_shape(ctx);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            zero_fill(args.outputs[1]);
            lm_head_cross_entropy_backward(shape, args.inputs[0].as<T>(), args.inputs[1].as<T>(),
                                           args.inputs[2].as<int32_t>(), args.inputs[3].as<T>(),
                                           args.inputs[4].as<T>()[0], args.outputs[0].as<T>(), args.outputs[1].as<T>());
          };
        });
      },
      // loss 1e-2, gradients 5e-2 (test_lm_head_grads_cuda.cpp, tests/cuda/test_loss.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 5e-2},
  });
}

// A derivative the forward wrote (d_hidden, d_weight) times the loss's gradient: scale_by, or the
// derivative itself when that gradient is autodiff's seed of 1 (the trainer's loss: the scale input
// already holds 1 / tokens) — no pass over a [V, C] weight gradient, no second tensor of it.
TensorId scaled_by_loss_gradient(GradientContext& ctx, TensorId derivative) {
  return ctx.output_grad_is_one(0) ? derivative : TensorId{ctx.op("scale_by", {derivative, ctx.output_grad(0)})};
}

// The CPU kernel of the rewritten forms: the loss, then ∂loss/∂hidden into output 2 and, with
// `weight_derivative`, ∂loss/∂weight into output 3 (zeroed first: the math accumulates into it, as
// lm_head_loss_backward's does — the same bits).
CpuKernel bind_loss_with_derivatives(const CpuBindContext& ctx, bool weight_derivative) {
  CrossEntropyShape shape = loss_shape(ctx);
  return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
    using T = decltype(zero);
    return [=](const CpuKernelArgs& args) {
      const T scale = args.inputs[3].as<T>()[0];
      const float* weights = token_weights(args, 4);
      CrossEntropyResult result = lm_head_cross_entropy_forward(
          shape, args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<int32_t>(), args.outputs[1].as<T>(),
          weights);
      args.outputs[0].as<T>()[0] = static_cast<T>(result.loss_sum * static_cast<double>(scale));
      T* d_weight = nullptr;
      if (weight_derivative) {
        zero_fill(args.outputs[3]);
        d_weight = args.outputs[3].as<T>();
      }
      lm_head_cross_entropy_backward(shape, args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<int32_t>(),
                                     args.outputs[1].as<T>(), scale, args.outputs[2].as<T>(), d_weight, weights);
    };
  });
}

void register_lm_head_loss(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "lm_head_loss",
      .inputs = {"hidden", "weight", "targets", "scale", "weights"},
      .outputs = {"loss", "logsumexp"},
      .infer = [](const InferContext& ctx) {
        int64_t rows = check_loss_inputs(ctx);
        check_scalar(ctx, 3);
        check_token_weights(ctx, 4, rows);
        return std::vector<TensorType>{{statistic_dtype(ctx.input(0).dtype), Shape{}},
                                       {statistic_dtype(ctx.input(0).dtype), Shape{rows}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        std::vector<TensorId> inputs = {ctx.input(0),  ctx.input(1),          ctx.input(2),
                                        ctx.output(1), ctx.output_grad(0), ctx.input(3)};
        const bool weighted = ctx.node().inputs.size() == 5;
        if (weighted) inputs.push_back(ctx.input(4));
        auto grads = ctx.op("lm_head_loss_backward", inputs, ctx.attrs().raw());
        InputGradients result = {if_needed(ctx, 0, grads[0]), if_needed(ctx, 1, grads[1]), std::nullopt, std::nullopt};
        if (weighted) result.push_back(std::nullopt);
        return result;
      },
      .cpu = [](const CpuBindContext& ctx) {
        CrossEntropyShape shape = loss_shape(ctx);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            CrossEntropyResult result = lm_head_cross_entropy_forward(
                shape, args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<int32_t>(), args.outputs[1].as<T>(),
                token_weights(args, 4));
            args.outputs[0].as<T>()[0] = static_cast<T>(result.loss_sum * static_cast<double>(args.inputs[3].as<T>()[0]));
          };
        });
      },
      .variadic_inputs = true,
      // loss 1e-2, gradients 5e-2 (test_lm_head_grads_cuda.cpp, tests/cuda/test_loss.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 5e-2},
  });
  registry.add(OpDef{
      .name = "lm_head_loss_with_input_grad",
      .inputs = {"hidden", "weight", "targets", "scale", "weights"},
      .outputs = {"loss", "logsumexp", "d_hidden"},
      .infer = [](const InferContext& ctx) {
        int64_t rows = check_loss_inputs(ctx);
        check_scalar(ctx, 3);
        check_token_weights(ctx, 4, rows);
        return std::vector<TensorType>{{statistic_dtype(ctx.input(0).dtype), Shape{}},
                                       {statistic_dtype(ctx.input(0).dtype), Shape{rows}}, ctx.input(0)};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        if (ctx.needs_input_grad(1)) {
          fail_user("{}: lm_head_loss_with_input_grad computes no weight gradient, but its weight is trainable; "
                    "use lm_head_loss_with_grads", ctx.attrs().where());
        }
        if (ctx.has_output_grad(1) || ctx.has_output_grad(2)) {
          fail_user("{}: only the loss output of lm_head_loss_with_input_grad is differentiable", ctx.attrs().where());
        }
        std::optional<TensorId> d_hidden;
        if (ctx.needs_input_grad(0)) d_hidden = scaled_by_loss_gradient(ctx, ctx.output(2));
        InputGradients result = {d_hidden, std::nullopt, std::nullopt, std::nullopt};
        if (ctx.node().inputs.size() == 5) result.push_back(std::nullopt);
        return result;
      },
      .cpu = [](const CpuBindContext& ctx) { return bind_loss_with_derivatives(ctx, false); },
      .variadic_inputs = true,
      // loss 1e-2, gradients 5e-2 (test_lm_head_grads_cuda.cpp, tests/cuda/test_loss.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 5e-2},
  });
  // The trainable-head form: as lm_head_loss_with_input_grad, plus d_weight from the same chunks.
  registry.add(OpDef{
      .name = "lm_head_loss_with_grads",
      .inputs = {"hidden", "weight", "targets", "scale", "weights"},
      .outputs = {"loss", "logsumexp", "d_hidden", "d_weight"},
      .infer = [](const InferContext& ctx) {
        int64_t rows = check_loss_inputs(ctx);
        check_scalar(ctx, 3);
        check_token_weights(ctx, 4, rows);
        return std::vector<TensorType>{{statistic_dtype(ctx.input(0).dtype), Shape{}},
                                       {statistic_dtype(ctx.input(0).dtype), Shape{rows}}, ctx.input(0), ctx.input(1)};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        if (ctx.has_output_grad(1) || ctx.has_output_grad(2) || ctx.has_output_grad(3)) {
          fail_user("{}: only the loss output of lm_head_loss_with_grads is differentiable", ctx.attrs().where());
        }
        // ∂loss/∂hidden and ∂loss/∂weight are already in outputs 2 and 3; only d_loss is applied.
        std::optional<TensorId> d_hidden, d_weight;
        if (ctx.needs_input_grad(0)) d_hidden = scaled_by_loss_gradient(ctx, ctx.output(2));
        if (ctx.needs_input_grad(1)) d_weight = scaled_by_loss_gradient(ctx, ctx.output(3));
        InputGradients result = {d_hidden, d_weight, std::nullopt, std::nullopt};
        if (ctx.node().inputs.size() == 5) result.push_back(std::nullopt);
        return result;
      },
      .cpu = [](const CpuBindContext& ctx) { return bind_loss_with_derivatives(ctx, true); },
      .variadic_inputs = true,
      // loss 1e-2, gradients 5e-2 (test_lm_head_grads_cuda.cpp, tests/cuda/test_loss.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 5e-2},
  });
  registry.add(OpDef{
      .name = "lm_head_loss_backward",
      .inputs = {"hidden", "weight", "targets", "logsumexp", "d_loss", "scale", "weights"},
      .outputs = {"d_hidden", "d_weight"},
      .infer = [](const InferContext& ctx) {
        int64_t rows = check_loss_inputs(ctx);
        check_logsumexp(ctx, 3, rows);
        check_scalar(ctx, 4);
        check_scalar(ctx, 5);
        check_token_weights(ctx, 6, rows);
        return std::vector<TensorType>{ctx.input(0), ctx.input(1)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        CrossEntropyShape shape = loss_shape(ctx);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            zero_fill(args.outputs[1]);
            T d_loss_sum = args.inputs[4].as<T>()[0] * args.inputs[5].as<T>()[0];
            lm_head_cross_entropy_backward(shape, args.inputs[0].as<T>(), args.inputs[1].as<T>(),
                                           args.inputs[2].as<int32_t>(), args.inputs[3].as<T>(), d_loss_sum,
                                           args.outputs[0].as<T>(), args.outputs[1].as<T>(), token_weights(args, 6));
          };
        });
      },
      .variadic_inputs = true,
      // loss 1e-2, gradients 5e-2 (test_lm_head_grads_cuda.cpp, tests/cuda/test_loss.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 5e-2},
  });
  registry.add(OpDef{
      .name = "lm_head_accuracy",
      .inputs = {"hidden", "weight", "targets"},
      .outputs = {"correct"},
      .infer = [](const InferContext& ctx) {
        check_loss_inputs(ctx);
        return std::vector<TensorType>{{statistic_dtype(ctx.input(0).dtype), Shape{}}};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        CrossEntropyShape shape = loss_shape(ctx);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          // One row of logits at a time; the scratch row is allocated here, at bind time.
          auto scratch = std::make_shared<std::vector<T>>(static_cast<size_t>(shape.vocab));
          return [=](const CpuKernelArgs& args) {
            const T* hidden = args.inputs[0].as<T>();
            const int32_t* targets = args.inputs[2].as<int32_t>();
            int64_t correct = 0;
            for (int64_t row = 0; row < shape.rows; ++row) {
              if (targets[row] == shape.ignore_index) continue;
              lm_head_logits(hidden + row * shape.hidden, args.inputs[1].as<T>(), 1, shape.hidden, shape.vocab,
                             scratch->data());
              int64_t best = 0;
              for (int64_t v = 1; v < shape.vocab; ++v) {
                if ((*scratch)[v] > (*scratch)[best]) best = v;
              }
              correct += best == targets[row] ? 1 : 0;
            }
            args.outputs[0].as<T>()[0] = static_cast<T>(correct);
          };
        });
      },
      // argmax hits, exact on the same logits (test_model_kernels.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 0.0, .bf16 = 0.0},
  });
}

}  // namespace

void register_cross_entropy_ops(OpRegistry& registry) {
  register_cross_entropy(registry);
  register_lm_head_loss(registry);
}

}  // namespace surogate::ops::defs
