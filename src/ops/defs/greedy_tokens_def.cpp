// Graph op "greedy_tokens", over ops/greedy_tokens.h: generation's greedy choice on the backend
// that holds the logits (generate/decode_graph.h appends it after the decode graph's head).
//   greedy_tokens(logits [..., V]) -> tokens I32 [...]: the first index of each row's largest
//     value, or -1 (ops::kUnusableRow) when the row holds NaN or +inf.
// Forward only (`.gradient = {}`): nothing differentiates through a choice.
#include "ops/defs/def_util.h"
#include "ops/greedy_tokens.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

void register_greedy_tokens(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "greedy_tokens",
      .inputs = {"logits"},
      .outputs = {"tokens"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        const Shape& logits = ctx.input(0).shape;
        if (logits.empty() || logits.back() < 1) ctx.fail("{} needs a last axis of at least one value", ctx.input_label(0));
        return std::vector<TensorType>{TensorType{DType::I32, Shape(logits.begin(), logits.end() - 1)}};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t vocab = last_dim(ctx.inputs[0]), rows = ctx.inputs[0].numel() / vocab;
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            greedy_tokens(args.inputs[0].as<T>(), rows, vocab, args.outputs[0].as<int32_t>());
          };
        });
      },
      // An integer output: the same index on both backends for the same values (the every-op test
      // compares integer outputs exactly; test_greedy_tokens_cuda.cpp adds ties, NaN and +inf).
      .backend_tolerance = graph::BackendTolerance{.f32 = 0.0, .bf16 = 0.0},
  });
}

}  // namespace

void register_greedy_tokens_ops(OpRegistry& registry) { register_greedy_tokens(registry); }

}  // namespace surogate::ops::defs
