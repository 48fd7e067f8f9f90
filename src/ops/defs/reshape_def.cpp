// Graph op "reshape" (x){shape: [d_1, ...]} -> out: the same elements in the same (row-major)
// order under another shape of equal element count, as torch's view / reshape of a contiguous
// tensor. The vision tower's merger reads its [patches, embed] rows as [patches / merge², merge² ·
// embed] (models/vision_tower.h). Its gradient is the reshape back. The kernels copy bytes (the
// graph has no views), so any dtype works; the CUDA binder is one device copy
// (runtime/cuda_lora_ops.cpp, beside concat / split).
#include <cstring>
#include <vector>

#include "ops/defs/def_util.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

void register_reshape(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "reshape",
      .inputs = {"x"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        const Shape shape = ctx.attrs.integers("shape");
        int64_t count = 1;
        for (int64_t dim : shape) {
          if (dim <= 0) ctx.fail("attribute 'shape' must hold positive sizes, got {}", dim);
          count *= dim;
        }
        if (count != shape_numel(ctx.input(0).shape)) {
          ctx.fail("attribute 'shape' holds {} elements, but {} holds {}", count, ctx.input_label(0),
                   shape_numel(ctx.input(0).shape));
        }
        return std::vector<TensorType>{{ctx.input(0).dtype, shape}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        return {ctx.op("reshape", {ctx.output_grad(0)}, {{"shape", ctx.type(ctx.input(0)).shape}})};
      },
      .cpu = [](const CpuBindContext& ctx) -> CpuKernel {
        const size_t bytes = static_cast<size_t>(ctx.inputs[0].numel()) * dtype_size_bytes(ctx.inputs[0].dtype);
        return [bytes](const CpuKernelArgs& args) {
          if (args.outputs[0].data != args.inputs[0].data) std::memmove(args.outputs[0].data, args.inputs[0].data, bytes);
        };
      },
      // byte copies (tests/runtime/single_op_cases.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 0.0, .bf16 = 0.0},
  });
}

}  // namespace

void register_reshape_ops(OpRegistry& registry) { register_reshape(registry); }

}  // namespace surogate::ops::defs
