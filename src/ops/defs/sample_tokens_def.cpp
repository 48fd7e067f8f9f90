// Graph op "sample_tokens", over ops/sample_tokens.h: generation's sampled choice on the backend
// that holds the logits.
//   sample_tokens(logits [..., V], params I32 [..., 8], context I32 [..., C]) -> tokens I32 [...]:
//     params holds each row's core/token_draw.h RowSampling as 8 words (floats by their bits),
//     context the row's token ids for the repetition penalty (-1: none). The token of each row,
//     or ops/sample_tokens.h's negative codes.
// Forward only (`.gradient = {}`): nothing differentiates through a choice.
#include "ops/defs/def_util.h"
#include "ops/sample_tokens.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

void register_sample_tokens(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "sample_tokens",
      .inputs = {"logits", "params", "context"},
      .outputs = {"tokens"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        ctx.expect_dtype(1, DType::I32);
        ctx.expect_dtype(2, DType::I32);
        const Shape& logits = ctx.input(0).shape;
        if (logits.empty() || logits.back() < 1) ctx.fail("{} needs a last axis of at least one value", ctx.input_label(0));
        const Shape rows(logits.begin(), logits.end() - 1);
        for (size_t input : {size_t{1}, size_t{2}}) {
          const Shape& shape = ctx.input(input).shape;
          if (shape.empty() || Shape(shape.begin(), shape.end() - 1) != rows) {
            ctx.fail("{} must have the rows of {}", ctx.input_label(input), ctx.input_label(0));
          }
        }
        if (ctx.input(1).shape.back() != kRowSamplingWords) ctx.fail("{} needs {} words a row", ctx.input_label(1), kRowSamplingWords);
        return std::vector<TensorType>{TensorType{DType::I32, rows}};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t vocab = last_dim(ctx.inputs[0]), rows = ctx.inputs[0].numel() / vocab;
        const int64_t width = last_dim(ctx.inputs[2]);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            sample_tokens(args.inputs[0].as<T>(), rows, vocab, reinterpret_cast<const RowSampling*>(args.inputs[1].as<int32_t>()),
                          args.inputs[2].as<int32_t>(), width, args.outputs[0].as<int32_t>());
          };
        });
      },
      // An integer output: the same token on both backends for the same values (the every-op test
      // compares integer outputs exactly; test_sample_tokens_cuda.cpp adds the edge cases).
      .backend_tolerance = graph::BackendTolerance{.f32 = 0.0, .bf16 = 0.0},
  });
}

}  // namespace

void register_sample_tokens_ops(OpRegistry& registry) { register_sample_tokens(registry); }

}  // namespace surogate::ops::defs
