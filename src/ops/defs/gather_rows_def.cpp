// Graph ops "gather_rows" and "gather_rows_sum" over ops/gather_rows.h: a micro-batch's token rows
// moved between two layouts (prompt sharing's gathers around attention, data/prompt_sharing.h).
//   gather_rows(x [B, N, ...], index I32 [B, M], sources I32 [B, N, K]) -> y [B, M, ...]
//     y's token m (flat over B·M) is x's token index[m] (flat over B·N), zeros where −1; `sources`
//     lists, for each token of x, the tokens of y that copy it (−1: none): what the gradient reads.
//   gather_rows_sum(d_y [B, M, ...], sources I32 [B, N, K]) -> d_x [B, N, ...]
//     d_x's token n is the sum of d_y's tokens sources[n, 0..K−1]: gather_rows' gradient.
// The trailing dimensions (a token's features) are any; x and d_y are any floating type.
#include <vector>

#include "ops/defs/def_util.h"
#include "ops/gather_rows.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

// Tokens [B, count] of `type` and the elements of one token.
struct TokenRows {
  int64_t tokens = 0, width = 1;
};

TokenRows token_rows(const Shape& shape) {
  TokenRows rows{shape[0] * shape[1], 1};
  for (size_t d = 2; d < shape.size(); ++d) rows.width *= shape[d];
  return rows;
}

void expect_tokens(const InferContext& ctx, size_t input) {
  if (ctx.input(input).shape.size() < 2) ctx.fail("{} must be [B, tokens, ...]", ctx.input_label(input));
}

// `sources` (input `at`) must be I32 [B, tokens, K].
void expect_sources(const InferContext& ctx, size_t at, int64_t batch, int64_t tokens) {
  ctx.expect_dtype(at, DType::I32);
  const Shape& shape = ctx.input(at).shape;
  if (shape.size() != 3 || shape[0] != batch || shape[1] != tokens || shape[2] < 1) {
    ctx.fail("{} must be I32[{}, {}, K]", ctx.input_label(at), batch, tokens);
  }
}

void register_gather_rows(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "gather_rows",
      .inputs = {"x", "index", "sources"},
      .outputs = {"y"},
      .infer = [](const InferContext& ctx) {
        expect_tokens(ctx, 0);
        const Shape& x = ctx.input(0).shape;
        ctx.expect_dtype(1, DType::I32);
        if (ctx.input(1).shape.size() != 2 || ctx.input(1).shape[0] != x[0]) {
          ctx.fail("{} must be I32[{}, M]", ctx.input_label(1), x[0]);
        }
        expect_sources(ctx, 2, x[0], x[1]);
        Shape y = x;
        y[1] = ctx.input(1).shape[1];
        return std::vector<TensorType>{{ctx.input(0).dtype, y}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        return {ctx.op("gather_rows_sum", {ctx.output_grad(0), ctx.input(2)}, {}), std::nullopt, std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) {
        const TokenRows x = token_rows(ctx.inputs[0].shape), y = token_rows(ctx.outputs[0].shape);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            gather_rows(args.inputs[0].as<T>(), x.tokens, args.inputs[1].as<int32_t>(), y.tokens, x.width,
                        args.outputs[0].as<T>());
          };
        });
      },
      // byte copies (tests/runtime/single_op_cases.cpp, run on both backends)
      .backend_tolerance = graph::BackendTolerance{.f32 = 0.0, .bf16 = 0.0},
  });
  registry.add(OpDef{
      .name = "gather_rows_sum",
      .inputs = {"d_y", "sources"},
      .outputs = {"d_x"},
      .infer = [](const InferContext& ctx) {
        expect_tokens(ctx, 0);
        const Shape& d_y = ctx.input(0).shape;
        ctx.expect_dtype(1, DType::I32);
        const Shape& sources = ctx.input(1).shape;
        if (sources.size() != 3 || sources[0] != d_y[0] || sources[2] < 1) {
          ctx.fail("{} must be I32[{}, N, K]", ctx.input_label(1), d_y[0]);
        }
        Shape d_x = d_y;
        d_x[1] = sources[1];
        return std::vector<TensorType>{{ctx.input(0).dtype, d_x}};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const TokenRows y = token_rows(ctx.inputs[0].shape), x = token_rows(ctx.outputs[0].shape);
        const int64_t fan_in = ctx.inputs[1].shape[2];
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            gather_rows_sum(args.inputs[0].as<T>(), y.tokens, args.inputs[1].as<int32_t>(), x.tokens, fan_in, y.width,
                            args.outputs[0].as<T>());
          };
        });
      },
      // fp32 sums of at most K rows, one rounding (tests/runtime/single_op_cases.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-6, .bf16 = 1e-2},
  });
}

}  // namespace

void register_gather_rows_ops(OpRegistry& registry) { register_gather_rows(registry); }

}  // namespace surogate::ops::defs
