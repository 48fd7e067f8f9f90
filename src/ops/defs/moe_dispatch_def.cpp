// Graph ops that move token rows between token order and expert order, over ops/moe_routing.h
// (M = tokens · k assignments):
//   moe_dispatch(indices I32 [..., k]){experts} -> (order I32 [M], position I32 [..., k],
//       offsets I32 [E + 1]): the stable sort of the assignments by expert. Integer outputs, no
//       gradient. The CUDA kernel sizes nothing on the host: offsets stay on the device and the
//       grouped expert matmuls read them there.
//   moe_permute(x [..., H], order, position){top_k} -> [M, H] (row p = x[order[p] / k]); position
//       is read only by its gradient, moe_permute_backward(d_out [M, H], position) -> d_x [..., H].
//   moe_unpermute(y [M, H], weights [..., k], position){} -> [..., H] = Σ_j w_j · y[position_j]
//       (weights in the statistic dtype; the output in y's), with
//       moe_unpermute_backward(d_out, y, weights, position) -> (d_y [M, H], d_weights [..., k]).
//   sigmoid_gated_add(base [..., H], x [..., H], gate [..., 1]) -> base + sigmoid(gate) · x: Qwen2-MoE's
//       shared expert added to the routed experts' sum; sigmoid_gated_add_backward(d_out, x, gate)
//       -> (d_x, d_gate), d_base being d_out itself.
#include <cmath>

#include "ops/defs/def_util.h"
#include "ops/defs/statistic_dtype.h"
#include "ops/moe_routing.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

Shape leading(const Shape& shape) { return Shape(shape.begin(), shape.end() - 1); }

Shape append(Shape shape, int64_t last) {
  shape.push_back(last);
  return shape;
}

// position / indices I32 [..., k]; returns k.
int64_t expect_assignments(const InferContext& ctx, size_t index) {
  ctx.expect_dtype(index, DType::I32);
  ctx.expect_min_rank(index, 1);
  return last_dim(ctx.input(index));
}

void register_moe_dispatch(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "moe_dispatch",
      .inputs = {"indices"},
      .outputs = {"order", "position", "offsets"},
      .infer = [](const InferContext& ctx) {
        expect_assignments(ctx, 0);
        const int64_t experts = ctx.attrs.integer("experts");
        if (experts < 1) ctx.fail("attribute 'experts' must be positive, got {}", experts);
        return std::vector<TensorType>{{DType::I32, Shape{ctx.input(0).numel()}}, ctx.input(0),
                                       {DType::I32, Shape{experts + 1}}};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) -> CpuKernel {
        const int64_t assignments = ctx.inputs[0].numel(), experts = ctx.attrs.integer("experts");
        return [=](const CpuKernelArgs& args) {
          moe_dispatch(args.inputs[0].as<int32_t>(), assignments, experts, args.outputs[0].as<int32_t>(),
                       args.outputs[1].as<int32_t>(), args.outputs[2].as<int32_t>());
        };
      },
      // fp32 1e-5, bf16 outputs and grouped GEMMs 1e-2, routing tables exact (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
}

void register_moe_permute(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "moe_permute",
      .inputs = {"x", "order", "position"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        ctx.expect_min_rank(0, 1);
        const int64_t top_k = expect_assignments(ctx, 2);
        ctx.expect_dtype(1, DType::I32);
        ctx.expect_rank(1, 1);
        if (leading(ctx.input(2).shape) != leading(ctx.input(0).shape) || ctx.input(1).numel() != ctx.input(2).numel()) {
          ctx.fail("{} and {} must hold the k assignments of every token of {}", ctx.input_label(1), ctx.input_label(2),
                   ctx.input_label(0));
        }
        return std::vector<TensorType>{{ctx.input(0).dtype, Shape{ctx.input(0).numel() / last_dim(ctx.input(0)) * top_k,
                                                                   last_dim(ctx.input(0))}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        return {ctx.op("moe_permute_backward", {ctx.output_grad(0), ctx.input(2)}), std::nullopt, std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t width = last_dim(ctx.inputs[0]), top_k = last_dim(ctx.inputs[2]);
        const int64_t assignments = ctx.inputs[1].numel();
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            moe_permute(args.inputs[0].as<T>(), args.inputs[1].as<int32_t>(), assignments, top_k, width,
                        args.outputs[0].as<T>());
          };
        });
      },
      // fp32 1e-5, bf16 outputs and grouped GEMMs 1e-2, routing tables exact (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "moe_permute_backward",
      .inputs = {"d_out", "position"},
      .outputs = {"d_x"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        ctx.expect_rank(0, 2);
        expect_assignments(ctx, 1);
        if (ctx.input(0).shape[0] != ctx.input(1).numel()) {
          ctx.fail("{} must have one row per assignment of {}", ctx.input_label(0), ctx.input_label(1));
        }
        return std::vector<TensorType>{{ctx.input(0).dtype, append(leading(ctx.input(1).shape), ctx.input(0).shape[1])}};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t width = ctx.inputs[0].shape[1], top_k = last_dim(ctx.inputs[1]);
        const int64_t tokens = ctx.inputs[1].numel() / top_k;
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            moe_permute_backward(args.inputs[0].as<T>(), args.inputs[1].as<int32_t>(), tokens, top_k, width,
                                 args.outputs[0].as<T>());
          };
        });
      },
      // fp32 1e-5, bf16 outputs and grouped GEMMs 1e-2, routing tables exact (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
}

// y [M, H], weights [..., k] (statistic dtype), position I32 [..., k] at inputs first.. first + 2.
void expect_combine(const InferContext& ctx, size_t first) {
  ctx.expect_floating(first);
  ctx.expect_rank(first, 2);
  expect_assignments(ctx, first + 2);
  if (ctx.input(first + 1) != TensorType{statistic_dtype(ctx.input(first).dtype), ctx.input(first + 2).shape}) {
    ctx.fail("{} must be {}", ctx.input_label(first + 1),
             format_type({statistic_dtype(ctx.input(first).dtype), ctx.input(first + 2).shape}));
  }
  if (ctx.input(first).shape[0] != ctx.input(first + 2).numel()) {
    ctx.fail("{} must have one row per assignment of {}", ctx.input_label(first), ctx.input_label(first + 2));
  }
}

void register_moe_unpermute(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "moe_unpermute",
      .inputs = {"y", "weights", "position"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        expect_combine(ctx, 0);
        return std::vector<TensorType>{{ctx.input(0).dtype, append(leading(ctx.input(2).shape), ctx.input(0).shape[1])}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        auto grads = ctx.op("moe_unpermute_backward", {ctx.output_grad(0), ctx.input(0), ctx.input(1), ctx.input(2)});
        return {if_needed(ctx, 0, grads[0]), if_needed(ctx, 1, grads[1]), std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t width = ctx.inputs[0].shape[1], top_k = last_dim(ctx.inputs[2]);
        const int64_t tokens = ctx.inputs[2].numel() / top_k;
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            moe_unpermute(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<int32_t>(), tokens, top_k,
                          width, args.outputs[0].as<T>());
          };
        });
      },
      // fp32 1e-5, bf16 outputs and grouped GEMMs 1e-2, routing tables exact (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "moe_unpermute_backward",
      .inputs = {"d_out", "y", "weights", "position"},
      .outputs = {"d_y", "d_weights"},
      .infer = [](const InferContext& ctx) {
        expect_combine(ctx, 1);
        const TensorType out{ctx.input(1).dtype, append(leading(ctx.input(3).shape), ctx.input(1).shape[1])};
        if (ctx.input(0) != out) ctx.fail("{} must be {}", ctx.input_label(0), format_type(out));
        return std::vector<TensorType>{ctx.input(1), ctx.input(2)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t width = ctx.inputs[1].shape[1], top_k = last_dim(ctx.inputs[3]);
        const int64_t tokens = ctx.inputs[3].numel() / top_k;
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            moe_unpermute_backward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(),
                                   args.inputs[3].as<int32_t>(), tokens, top_k, width, args.outputs[0].as<T>(),
                                   args.outputs[1].as<T>());
          };
        });
      },
      // fp32 1e-5, bf16 outputs and grouped GEMMs 1e-2, routing tables exact (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
}

void register_sigmoid_gated_add(OpRegistry& registry) {
  auto expect_gate = [](const InferContext& ctx, size_t x, size_t gate) {
    ctx.expect_floating(x);
    ctx.expect_min_rank(x, 1);
    if (ctx.input(gate) != TensorType{ctx.input(x).dtype, append(leading(ctx.input(x).shape), 1)}) {
      ctx.fail("{} must be {}", ctx.input_label(gate), format_type({ctx.input(x).dtype, append(leading(ctx.input(x).shape), 1)}));
    }
  };
  registry.add(OpDef{
      .name = "sigmoid_gated_add",
      .inputs = {"base", "x", "gate"},
      .outputs = {"out"},
      .infer = [expect_gate](const InferContext& ctx) {
        ctx.expect_same_type(0, 1);
        expect_gate(ctx, 1, 2);
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        const TensorId d_out = ctx.output_grad(0);
        std::optional<TensorId> d_x, d_gate;
        if (ctx.needs_input_grad(1) || ctx.needs_input_grad(2)) {
          auto grads = ctx.op("sigmoid_gated_add_backward", {d_out, ctx.input(1), ctx.input(2)});
          d_x = if_needed(ctx, 1, grads[0]);
          d_gate = if_needed(ctx, 2, grads[1]);
        }
        return {if_needed(ctx, 0, d_out), d_x, d_gate};
      },
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t width = last_dim(ctx.inputs[1]), rows = ctx.inputs[1].numel() / width;
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            const T *base = args.inputs[0].as<T>(), *x = args.inputs[1].as<T>(), *gate = args.inputs[2].as<T>();
            T* out = args.outputs[0].as<T>();
            for (int64_t r = 0; r < rows; ++r) {
              const T scale = T(1) / (T(1) + std::exp(-gate[r]));
              for (int64_t c = 0; c < width; ++c) out[r * width + c] = base[r * width + c] + scale * x[r * width + c];
            }
          };
        });
      },
      // fp32 1e-5, bf16 outputs and grouped GEMMs 1e-2, routing tables exact (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "sigmoid_gated_add_backward",
      .inputs = {"d_out", "x", "gate"},
      .outputs = {"d_x", "d_gate"},
      .infer = [expect_gate](const InferContext& ctx) {
        ctx.expect_same_type(0, 1);
        expect_gate(ctx, 1, 2);
        return std::vector<TensorType>{ctx.input(1), ctx.input(2)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t width = last_dim(ctx.inputs[1]), rows = ctx.inputs[1].numel() / width;
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            const T *d_out = args.inputs[0].as<T>(), *x = args.inputs[1].as<T>(), *gate = args.inputs[2].as<T>();
            T *d_x = args.outputs[0].as<T>(), *d_gate = args.outputs[1].as<T>();
            for (int64_t r = 0; r < rows; ++r) {
              const T scale = T(1) / (T(1) + std::exp(-gate[r]));
              T dot = 0;
              for (int64_t c = 0; c < width; ++c) {
                d_x[r * width + c] = scale * d_out[r * width + c];
                dot += d_out[r * width + c] * x[r * width + c];
              }
              d_gate[r] = dot * scale * (T(1) - scale);
            }
          };
        });
      },
      // fp32 1e-5, bf16 outputs and grouped GEMMs 1e-2, routing tables exact (test_moe_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-2},
  });
}

}  // namespace

void register_moe_dispatch_ops(OpRegistry& registry) {
  register_moe_dispatch(registry);
  register_moe_permute(registry);
  register_moe_unpermute(registry);
  register_sigmoid_gated_add(registry);
}

}  // namespace surogate::ops::defs
