// Graph op "embedding" (ids I32 [...], table [V, D] -> out [..., D]) and its backward
// "embedding_backward" (ids, d_out, table -> d_table), over ops/embedding.h. The backward
// zero-fills d_table and then scatter-adds (the math accumulates).
#include "ops/defs/def_util.h"
#include "ops/embedding.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

void register_embedding(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "embedding",
      .inputs = {"ids", "table"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_integer(0);
        ctx.expect_dtype(0, DType::I32);
        ctx.expect_floating(1);
        ctx.expect_rank(1, 2);
        Shape shape = ctx.input(0).shape;
        shape.push_back(ctx.input(1).shape[1]);
        return std::vector<TensorType>{{ctx.input(1).dtype, shape}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        if (!ctx.needs_input_grad(1)) return {std::nullopt, std::nullopt};
        return {std::nullopt, ctx.op("embedding_backward", {ctx.input(0), ctx.output_grad(0), ctx.input(1)})};
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t tokens = ctx.inputs[0].numel(), vocab = ctx.inputs[1].shape[0], dim = ctx.inputs[1].shape[1];
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            embedding_forward(args.inputs[0].as<int32_t>(), args.inputs[1].as<T>(), tokens, vocab, dim,
                              args.outputs[0].as<T>());
          };
        });
      },
      // gather exact, fp32 gradient sums 1e-4, one bf16 rounding 4e-3 (tests/cuda/test_elementwise.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 4e-3},
  });
  registry.add(OpDef{
      .name = "embedding_backward",
      .inputs = {"ids", "d_out", "table"},
      .outputs = {"d_table"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_dtype(0, DType::I32);
        ctx.expect_rank(2, 2);
        Shape expected = ctx.input(0).shape;
        expected.push_back(ctx.input(2).shape[1]);
        if (ctx.input(1) != TensorType{ctx.input(2).dtype, expected}) {
          ctx.fail("{} must be {}", ctx.input_label(1), format_type({ctx.input(2).dtype, expected}));
        }
        return std::vector<TensorType>{ctx.input(2)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t tokens = ctx.inputs[0].numel(), vocab = ctx.inputs[2].shape[0], dim = ctx.inputs[2].shape[1];
        return bind_floating(ctx, ctx.inputs[2].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            zero_fill(args.outputs[0]);
            embedding_backward(args.inputs[0].as<int32_t>(), args.inputs[1].as<T>(), tokens, vocab, dim,
                               args.outputs[0].as<T>());
          };
        });
      },
      // gather exact, fp32 gradient sums 1e-4, one bf16 rounding 4e-3 (tests/cuda/test_elementwise.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 4e-3},
  });
}

}  // namespace

void register_embedding_ops(OpRegistry& registry) { register_embedding(registry); }

}  // namespace surogate::ops::defs
