// Graph ops "gelu" (x -> gelu(x)) and "gelu_backward" (d_out, x -> d_x), over ops/gelu.h.
//   attr approximate: "none" (default; transformers' "gelu") or "tanh" ("gelu_pytorch_tanh",
//   "gelu_new"), torch's spelling, or "quick" (x · σ(1.702 x), "quick_gelu"; CPU backend only).
//   Any shape; d_x is written.
#include "ops/defs/def_util.h"
#include "ops/gelu.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

GeluApproximation approximation_attr(const Attrs& attrs) {
  const std::string name = attrs.string_or("approximate", "none");
  const std::optional<GeluApproximation> approximation = gelu_approximation_from_name(name);
  if (!approximation) {
    fail_user("{}: attribute 'approximate' must be \"none\" or \"tanh\" (torch's forms) or \"quick\", got \"{}\"",
              attrs.where(), name);
  }
  return *approximation;
}

nlohmann::json approximation_json(const Attrs& attrs) {
  return nlohmann::json{{"approximate", attrs.string_or("approximate", "none")}};
}

}  // namespace

void register_gelu_ops(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "gelu",
      .inputs = {"x"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        approximation_attr(ctx.attrs);
        ctx.expect_floating(0);
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        return {ctx.op("gelu_backward", {ctx.output_grad(0), ctx.input(0)}, approximation_json(ctx.attrs()))[0]};
      },
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t count = ctx.inputs[0].numel();
        const GeluApproximation approximation = approximation_attr(ctx.attrs);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            gelu_forward(args.inputs[0].as<T>(), count, approximation, args.outputs[0].as<T>());
          };
        });
      },
      // fp32 elementwise math (erff / tanhf / expf), one bf16 rounding: 4e-3 (tests/runtime_cuda/test_gelu_layernorm_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 4e-3},
  });
  registry.add(OpDef{
      .name = "gelu_backward",
      .inputs = {"d_out", "x"},
      .outputs = {"d_x"},
      .infer = [](const InferContext& ctx) {
        approximation_attr(ctx.attrs);
        ctx.expect_floating(1);
        ctx.expect_same_type(1, 0);
        return std::vector<TensorType>{ctx.input(1)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t count = ctx.inputs[1].numel();
        const GeluApproximation approximation = approximation_attr(ctx.attrs);
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            gelu_backward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), count, approximation, args.outputs[0].as<T>());
          };
        });
      },
      // fp32 elementwise math (erff / tanhf / expf), one bf16 rounding: 4e-3 (tests/runtime_cuda/test_gelu_layernorm_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 4e-3},
  });
}

}  // namespace surogate::ops::defs
