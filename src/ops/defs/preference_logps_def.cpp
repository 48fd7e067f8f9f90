// Graph ops for per-sequence completion log-probabilities (ops/preference_logps.h), what the
// preference losses are written over:
//   sequence_logps(hidden [..., D], weight [V, D], targets I32 [...], sequence_ids I32 [...]){sequences S}
//     -> logps [S], logit_sums [S] (statistic dtype; not differentiable: metrics), logsumexp [N]
//   sequence_logps_backward(hidden, weight, targets, sequence_ids, logsumexp, d_logps [S])
//     -> d_hidden (written), d_weight (zero-filled, then accumulated).
// sequence_ids[n] names the sequence whose completion token targets[n] is (−1: none); the trainer's
// preference objective (train/objective/) builds them from the batch's document ids.
#include <vector>

#include "ops/defs/def_util.h"
#include "ops/defs/lm_head_inputs.h"
#include "ops/defs/statistic_dtype.h"
#include "ops/preference_logps.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

// hidden (0), weight (1), targets (2), sequence_ids (3): the row count.
int64_t check_logps_inputs(const InferContext& ctx) {
  const int64_t rows = check_lm_head_inputs(ctx);
  ctx.expect_dtype(3, DType::I32);
  if (ctx.input(3).numel() != rows) {
    ctx.fail("{} must hold one value per row of {} ({} rows)", ctx.input_label(3), ctx.input_label(0), rows);
  }
  if (ctx.attrs.integer_or("sequences", 0) < 1) ctx.fail("attribute 'sequences' must be at least 1");
  return rows;
}

SequenceLogpsShape logps_shape(const CpuBindContext& ctx) {
  SequenceLogpsShape shape;
  shape.vocab = ctx.inputs[1].shape[0];
  shape.hidden = ctx.inputs[1].shape[1];
  shape.rows = ctx.inputs[0].numel() / shape.hidden;
  shape.sequences = ctx.attrs.integer_or("sequences", 1);
  return shape;
}

void register_sequence_logps(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "sequence_logps",
      .inputs = {"hidden", "weight", "targets", "sequence_ids"},
      .outputs = {"logps", "logit_sums", "logsumexp"},
      .infer = [](const InferContext& ctx) {
        const int64_t rows = check_logps_inputs(ctx);
        const int64_t sequences = ctx.attrs.integer_or("sequences", 1);
        const DType dtype = statistic_dtype(ctx.input(0).dtype);
        return std::vector<TensorType>{{dtype, Shape{sequences}}, {dtype, Shape{sequences}}, {dtype, Shape{rows}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        if (ctx.has_output_grad(1) || ctx.has_output_grad(2)) {
          fail_user("{}: only the logps output of sequence_logps is differentiable", ctx.attrs().where());
        }
        auto grads = ctx.op("sequence_logps_backward",
                            {ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3), ctx.output(2), ctx.output_grad(0)},
                            ctx.attrs().raw());
        return {if_needed(ctx, 0, grads[0]), if_needed(ctx, 1, grads[1]), std::nullopt, std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) {
        const SequenceLogpsShape shape = logps_shape(ctx);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            sequence_logps_forward(shape, args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<int32_t>(),
                                   args.inputs[3].as<int32_t>(), args.outputs[0].as<T>(), args.outputs[1].as<T>(),
                                   args.outputs[2].as<T>());
          };
        });
      },
      // As lm_head_loss's (the same chunked LM-head kernel): tests/runtime_cuda/test_preference_ops_cuda.cpp
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 5e-2},
  });
  registry.add(OpDef{
      .name = "sequence_logps_backward",
      .inputs = {"hidden", "weight", "targets", "sequence_ids", "logsumexp", "d_logps"},
      .outputs = {"d_hidden", "d_weight"},
      .infer = [](const InferContext& ctx) {
        const int64_t rows = check_logps_inputs(ctx);
        const DType dtype = statistic_dtype(ctx.input(0).dtype);
        if (ctx.input(4) != TensorType{dtype, Shape{rows}}) ctx.fail("{} must be {}", ctx.input_label(4), format_type({dtype, Shape{rows}}));
        const int64_t sequences = ctx.attrs.integer_or("sequences", 1);
        if (ctx.input(5) != TensorType{dtype, Shape{sequences}}) {
          ctx.fail("{} must be {}", ctx.input_label(5), format_type({dtype, Shape{sequences}}));
        }
        return std::vector<TensorType>{ctx.input(0), ctx.input(1)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const SequenceLogpsShape shape = logps_shape(ctx);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            zero_fill(args.outputs[1]);
            sequence_logps_backward(shape, args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<int32_t>(),
                                    args.inputs[3].as<int32_t>(), args.inputs[4].as<T>(), args.inputs[5].as<T>(),
                                    args.outputs[0].as<T>(), args.outputs[1].as<T>());
          };
        });
      },
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 5e-2},
  });
}

}  // namespace

void register_preference_logps_ops(OpRegistry& registry) { register_sequence_logps(registry); }

}  // namespace surogate::ops::defs
