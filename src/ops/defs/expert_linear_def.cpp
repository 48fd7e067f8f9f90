// Graph op "expert_linear"(x [M, in], weight [E, out, in], offsets I32 [E + 1]) -> [M, out]: the
// experts' projections of an MoE layer over rows sorted by expert (moe_dispatch / moe_permute),
// expert e's rows [offsets[e], offsets[e + 1]) times W_eᵀ, over ops/expert_linear.h. Backward:
//   expert_linear_backward_input(d_out, weight, offsets)            -> d_x [M, in]
//   expert_linear_backward_weight(d_out, x, offsets)                -> d_weight [E, out, in]
//   expert_linear_backward_weight_accumulate(d_out, x, offsets)     -> d_weight += (autodiff's form
//       in low-precision graphs: the persistent gradient written by the grouped matmul, beta = 1)
// A frozen expert stack (LoRA) costs no weight product. On the GPU each is one grouped GEMM over
// all experts (cuda/kernels/grouped_gemm.h), sized from offsets on the device.
#include "ops/defs/def_util.h"
#include "ops/expert_linear.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

// weight [E, out, in] at `weight`, offsets I32 [E + 1] at `offsets`, both of the op's dtype.
void expect_experts(const InferContext& ctx, size_t weight, size_t offsets, size_t reference) {
  ctx.expect_rank(weight, 3);
  if (ctx.input(weight).dtype != ctx.input(reference).dtype) {
    ctx.fail("{} must have the dtype of {}", ctx.input_label(weight), ctx.input_label(reference));
  }
  if (ctx.input(offsets) != TensorType{DType::I32, Shape{ctx.input(weight).shape[0] + 1}}) {
    ctx.fail("{} must be I32[{}] (one offset per expert, and the end)", ctx.input_label(offsets),
             ctx.input(weight).shape[0] + 1);
  }
}

struct ExpertDims {
  int64_t experts, out, in, rows;
};

ExpertDims dims(std::span<const TensorType> inputs, size_t weight, size_t rows_of) {
  const Shape& shape = inputs[weight].shape;
  return {shape[0], shape[1], shape[2], inputs[rows_of].shape[0]};
}

std::vector<TensorType> weight_gradient_type(const InferContext& ctx) {
  ctx.expect_floating(0);
  ctx.expect_rank(0, 2);
  ctx.expect_rank(1, 2);
  if (ctx.input(1).dtype != ctx.input(0).dtype || ctx.input(1).shape[0] != ctx.input(0).shape[0]) {
    ctx.fail("{} must have the dtype and rows of {}", ctx.input_label(1), ctx.input_label(0));
  }
  ctx.expect_dtype(2, DType::I32);
  ctx.expect_rank(2, 1);
  return {{ctx.input(0).dtype, Shape{ctx.input(2).shape[0] - 1, ctx.input(0).shape[1], ctx.input(1).shape[1]}}};
}

CpuKernel bind_weight_gradient(const CpuBindContext& ctx, bool accumulate) {
  const int64_t experts = ctx.inputs[2].shape[0] - 1, out = ctx.inputs[0].shape[1], in = ctx.inputs[1].shape[1];
  return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
    using T = decltype(zero);
    return [=](const CpuKernelArgs& args) {
      if (!accumulate) zero_fill(args.outputs[0]);
      expert_linear_backward_weight(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<int32_t>(),
                                    experts, in, out, args.outputs[0].as<T>());
    };
  });
}

void register_all(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "expert_linear",
      .inputs = {"x", "weight", "offsets"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        ctx.expect_rank(0, 2);
        expect_experts(ctx, 1, 2, 0);
        ctx.expect_dim(0, -1, ctx.input(1).shape[2]);
        return std::vector<TensorType>{{ctx.input(0).dtype, Shape{ctx.input(0).shape[0], ctx.input(1).shape[1]}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        const TensorId d_out = ctx.output_grad(0);
        std::optional<TensorId> d_x, d_weight;
        if (ctx.needs_input_grad(0)) d_x = ctx.op("expert_linear_backward_input", {d_out, ctx.input(1), ctx.input(2)});
        if (ctx.needs_input_grad(1)) {
          d_weight = ctx.op("expert_linear_backward_weight", {d_out, ctx.input(0), ctx.input(2)});
        }
        return {d_x, d_weight, std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) {
        const ExpertDims d = dims(ctx.inputs, 1, 0);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            expert_linear_forward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<int32_t>(),
                                  d.experts, d.in, d.out, args.outputs[0].as<T>());
          };
        });
      },
      // fp32 1e-5, bf16 outputs and grouped GEMMs 1e-2, routing tables exact (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "expert_linear_backward_input",
      .inputs = {"d_out", "weight", "offsets"},
      .outputs = {"d_x"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        ctx.expect_rank(0, 2);
        expect_experts(ctx, 1, 2, 0);
        ctx.expect_dim(0, -1, ctx.input(1).shape[1]);
        return std::vector<TensorType>{{ctx.input(0).dtype, Shape{ctx.input(0).shape[0], ctx.input(1).shape[2]}}};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const ExpertDims d = dims(ctx.inputs, 1, 0);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            // Rows of experts without rows do not exist; every row belongs to one expert, so d_x
            // is fully written.
            expert_linear_backward_input(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<int32_t>(),
                                         d.experts, d.in, d.out, args.outputs[0].as<T>());
          };
        });
      },
      // fp32 1e-5, bf16 outputs and grouped GEMMs 1e-2, routing tables exact (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "expert_linear_backward_weight",
      .inputs = {"d_out", "x", "offsets"},
      .outputs = {"d_weight"},
      .infer = weight_gradient_type,
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) { return bind_weight_gradient(ctx, false); },
      // fp32 1e-5, bf16 outputs and grouped GEMMs 1e-2, routing tables exact (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "expert_linear_backward_weight_accumulate",
      .inputs = {"d_out", "x", "offsets"},
      .outputs = {"d_weight"},
      .infer = weight_gradient_type,
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) { return bind_weight_gradient(ctx, true); },
      .accumulates_into_output = true,
      // fp32 1e-5, bf16 outputs and grouped GEMMs 1e-2, routing tables exact (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
}

}  // namespace

void register_expert_linear_ops(OpRegistry& registry) { register_all(registry); }

}  // namespace surogate::ops::defs
