// Graph ops "dropout" (x, seed I32 [] -> out; attrs p, stream) over ops/dropout.h, and
// "dropout_add" (x, seed, addend -> addend + dropout(x)), the gradient form in low-precision graphs
// that folds the input's pending gradient sum into the same pass (as linear_backward_input_add
// does for a matmul): one read of each operand and one write instead of a dropout pass plus an add
// pass. The seed is a graph input the caller writes per micro-batch, so the mask changes every step
// yet is a pure function of (seed, stream, element): the gradient is the same op on d_out, and
// recompute and resumed runs drop exactly the same elements. x may be F32 / F64 (CPU) or BF16 (the
// CUDA backend's BF16 graphs: runtime/cuda_lora_ops.cpp draws the same mask).
#include "ops/defs/def_util.h"
#include "ops/dropout.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

double probability(const Attrs& attrs) {
  const double p = attrs.number("p");
  if (!(p >= 0.0 && p < 1.0)) fail_user("{}: dropout attr p = {} must be in [0, 1)", attrs.where(), p);
  return p;
}

// dropout (x, seed) and dropout_add (x, seed, addend): the addend, when present, is input 2.
CpuKernel bind_cpu_dropout(const CpuBindContext& ctx) {
  const int64_t count = ctx.outputs[0].numel();
  const double p = probability(ctx.attrs);
  const auto stream = static_cast<uint64_t>(ctx.attrs.integer("stream"));
  const bool with_addend = ctx.inputs.size() == 3;
  return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
    using T = decltype(zero);
    return [=](const CpuKernelArgs& args) {
      const int32_t bound = *args.inputs[1].as<int32_t>();
      const auto seed = static_cast<uint64_t>(static_cast<uint32_t>(bound));
      dropout_forward(args.inputs[0].as<T>(), count, bound == kDropoutOffSeed ? 0.0 : p, seed, stream,
                      args.outputs[0].as<T>(),
                      with_addend ? args.inputs[2].as<T>() : nullptr);
    };
  });
}

}  // namespace

void register_dropout_ops(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "dropout",
      .inputs = {"x", "seed"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        ctx.expect_dtype(1, DType::I32);
        ctx.expect_rank(1, 0);
        probability(ctx.attrs);
        ctx.attrs.integer("stream");
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        // d_x = d_out · mask / (1 − p): the same mask, regenerated from the same seed and stream.
        // In BF16 graphs x's other contributions (the base projections reading the same input)
        // are folded in by dropout_add; F32 / F64 graphs keep the separate add (CPU reference).
        const DType dtype = ctx.type(ctx.output_grad(0)).dtype;
        if (dtype != DType::F32 && dtype != DType::F64) {
          if (auto pending = ctx.take_pending_input_grad(0)) {
            return {ctx.op("dropout_add", {ctx.output_grad(0), ctx.input(1), *pending}, ctx.attrs().raw()),
                    std::nullopt};
          }
        }
        return {ctx.op("dropout", {ctx.output_grad(0), ctx.input(1)}, ctx.attrs().raw()), std::nullopt};
      },
      .cpu = bind_cpu_dropout,
      // the same mask bit for bit, one bf16 rounding: 4e-3 (test_lora_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-6, .bf16 = 4e-3},
  });
  registry.add(OpDef{
      .name = "dropout_add",
      .inputs = {"x", "seed", "addend"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        ctx.expect_dtype(1, DType::I32);
        ctx.expect_rank(1, 0);
        if (ctx.input(2) != ctx.input(0)) ctx.fail("addend must have the type of x");
        probability(ctx.attrs);
        ctx.attrs.integer("stream");
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = {},
      .cpu = bind_cpu_dropout,
      // the same mask bit for bit, one bf16 rounding: 4e-3 (test_lora_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-6, .bf16 = 4e-3},
  });
}

}  // namespace surogate::ops::defs
