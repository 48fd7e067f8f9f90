// Graph op "round_fp16", the CPU backend's emulation of fp16 storage (torch_dtype: float16, see
// models/fp16_emulation.h):
//   round_fp16(x) -> out (x's type): every value rounded to the nearest IEEE fp16 value (ties to
//   even), as the GPU's fp16 tensors hold it — magnitudes past 65504 become ±inf, values under
//   2^-24 flush to zero through fp16's subnormals, NaN stays NaN. What comes out is still F32 / F64.
// Gradient: the output gradient rounded the same way, which is what the GPU's fp16 gradient of
// the tensor holds (an fp16 tensor's gradient is an fp16 tensor).
#include "core/bfloat16.h"
#include "ops/defs/def_util.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

void register_round_fp16(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "round_fp16",
      .inputs = {"x"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        return {ctx.op("round_fp16", {ctx.output_grad(0)}, nlohmann::json::object())};
      },
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t count = ctx.outputs[0].numel();
        return bind_floating(ctx, ctx.outputs[0].dtype, [count](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [count](const CpuKernelArgs& args) {
            const T* x = args.inputs[0].as<T>();
            T* out = args.outputs[0].as<T>();
            for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(f16_to_float(float_to_f16(static_cast<float>(x[i]))));
          };
        });
      },
      // one rounding to fp16 on both (test_fp16_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 0.0, .bf16 = 0.0},
  });
}

}  // namespace

void register_round_fp16_ops(OpRegistry& registry) { register_round_fp16(registry); }

}  // namespace surogate::ops::defs
