// The ops the engine itself emits, with shape rules, gradient rules and CPU kernels:
//   add(a, b)              elementwise a + b (same type); autodiff sums fan-out gradients with it
//   mul(a, b)              elementwise a * b (same type)
//   scale(x){factor}       x * factor
//   scale_by(x, factor)    x * factor for a scalar tensor factor (shape []): F32 for a BF16 / F16 x,
//                          x's dtype otherwise (the loss gradient d_loss times a saved gradient)
//   scale_rows(x, factor)  x [..., W] times factor [...] (one value a row of W, x's dtype): the
//                          Qwen3-VL tower's interpolation weights, uploaded one a patch
//   fill(){value, shape, dtype}   a tensor filled with `value` (the loss seed, zero gradients)
//   sum(x)                 the sum of all elements, a scalar (shape [])
//   broadcast(s){shape}    a scalar s repeated to `shape` (the gradient of sum)
//   accumulate(g)          out += g, where out is a persistent parameter gradient; the only op
//                          whose kernel reads its output (gradient accumulation across micro-batches)
//   offload_to_host(x)     a copy of x in host memory; fetch_from_host(h) the copy back (any dtype).
//                          The offload_residual pass inserts them (compiler/residual_offload.h); a
//                          backend may run them asynchronously (the CUDA backend on side streams),
//                          the CPU kernel is a memcpy.
// Kernels support F32 and F64 (F64 is what finite-difference gradient checks run in).
#include <fmt/ranges.h>

#include <cstring>

#include "graph/op_registry.h"

namespace surogate::graph {
namespace {

// Calls body(T{}) with T = float or double after the dtype of a bound tensor.
template <typename Body>
CpuKernel bind_floating(const CpuBindContext& ctx, DType dtype, Body body) {
  if (dtype == DType::F32) return body(float{});
  if (dtype == DType::F64) return body(double{});
  fail_user("node '{}' (op {}): the CPU backend runs F32 or F64 tensors, got {}", ctx.node.name, ctx.node.op,
            dtype_safetensors_name(dtype));
}

std::vector<TensorType> same_as_first(const InferContext& ctx) {
  ctx.expect_floating(0);
  for (size_t i = 1; i < ctx.input_count(); ++i) ctx.expect_same_type(0, i);
  return {ctx.input(0)};
}

DType dtype_attr(const Attrs& attrs) {
  std::string name = attrs.string_or("dtype", "F32");
  auto dtype = dtype_from_safetensors_name(name);
  if (!dtype) fail_user("{}: attribute 'dtype' is '{}', not a dtype (F32, BF16, ...)", attrs.where(), name);
  return *dtype;
}

Shape shape_attr(const Attrs& attrs) {
  Shape shape = attrs.integers("shape");
  for (int64_t dim : shape) {
    if (dim <= 0) fail_user("{}: attribute 'shape' {} has a non-positive dimension", attrs.where(), format_shape(shape));
  }
  return shape;
}

void register_add(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "add",
      .inputs = {"a", "b"},
      .outputs = {"out"},
      .infer = same_as_first,
      .gradient = [](GradientContext& ctx) -> InputGradients {
        TensorId grad = ctx.output_grad(0);
        return {grad, grad};
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t count = ctx.outputs[0].numel();
        return bind_floating(ctx, ctx.outputs[0].dtype, [count](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [count](const CpuKernelArgs& args) {
            const T* a = args.inputs[0].as<T>();
            const T* b = args.inputs[1].as<T>();
            T* out = args.outputs[0].as<T>();
            for (int64_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
          };
        });
      },
      // core-op graphs 1e-6 (test_cuda_backend.cpp), one bf16 rounding 4e-3 (test_model_kernels.cpp)
      .backend_tolerance = BackendTolerance{.f32 = 1e-6, .bf16 = 4e-3},
  });
}

void register_mul(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "mul",
      .inputs = {"a", "b"},
      .outputs = {"out"},
      .infer = same_as_first,
      .gradient = [](GradientContext& ctx) -> InputGradients {
        TensorId grad = ctx.output_grad(0);
        std::optional<TensorId> grad_a, grad_b;
        if (ctx.needs_input_grad(0)) grad_a = ctx.op("mul", {grad, ctx.input(1)});
        if (ctx.needs_input_grad(1)) grad_b = ctx.op("mul", {grad, ctx.input(0)});
        return {grad_a, grad_b};
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t count = ctx.outputs[0].numel();
        return bind_floating(ctx, ctx.outputs[0].dtype, [count](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [count](const CpuKernelArgs& args) {
            const T* a = args.inputs[0].as<T>();
            const T* b = args.inputs[1].as<T>();
            T* out = args.outputs[0].as<T>();
            for (int64_t i = 0; i < count; ++i) out[i] = a[i] * b[i];
          };
        });
      },
      // core-op graphs 1e-6 (test_cuda_backend.cpp), one bf16 rounding 4e-3 (test_model_kernels.cpp)
      .backend_tolerance = BackendTolerance{.f32 = 1e-6, .bf16 = 4e-3},
  });
}

void register_scale(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "scale",
      .inputs = {"x"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.attrs.number("factor");
        return same_as_first(ctx);
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        return {ctx.op("scale", {ctx.output_grad(0)}, {{"factor", ctx.attrs().number("factor")}})};
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t count = ctx.outputs[0].numel();
        double factor = ctx.attrs.number("factor");
        return bind_floating(ctx, ctx.outputs[0].dtype, [count, factor](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [count, factor](const CpuKernelArgs& args) {
            const T* x = args.inputs[0].as<T>();
            T* out = args.outputs[0].as<T>();
            for (int64_t i = 0; i < count; ++i) out[i] = x[i] * static_cast<T>(factor);
          };
        });
      },
      // core-op graphs 1e-6 (test_cuda_backend.cpp), one bf16 rounding 4e-3 (test_model_kernels.cpp)
      .backend_tolerance = BackendTolerance{.f32 = 1e-6, .bf16 = 4e-3},
  });
}

void register_scale_by(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "scale_by",
      .inputs = {"x", "factor"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        const DType x = ctx.input(0).dtype;
        const DType factor = x == DType::BF16 || x == DType::F16 ? DType::F32 : x;
        if (ctx.input(1) != TensorType{factor, Shape{}}) {
          ctx.fail("{} must be a scalar {}[]", ctx.input_label(1), dtype_safetensors_name(factor));
        }
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        if (ctx.needs_input_grad(1)) {
          fail_user("{}: the factor of scale_by is not differentiable", ctx.attrs().where());
        }
        return {ctx.op("scale_by", {ctx.output_grad(0), ctx.input(1)}), std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t count = ctx.outputs[0].numel();
        return bind_floating(ctx, ctx.outputs[0].dtype, [count](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [count](const CpuKernelArgs& args) {
            const T* x = args.inputs[0].as<T>();
            const T factor = args.inputs[1].as<T>()[0];
            T* out = args.outputs[0].as<T>();
            for (int64_t i = 0; i < count; ++i) out[i] = x[i] * factor;
          };
        });
      },
      // core-op graphs 1e-6 (test_cuda_backend.cpp), one bf16 rounding 4e-3 (test_model_kernels.cpp)
      .backend_tolerance = BackendTolerance{.f32 = 1e-6, .bf16 = 4e-3},
  });
}

void register_scale_rows(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "scale_rows",
      .inputs = {"x", "factor"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        const TensorType& x = ctx.input(0);
        if (x.shape.empty()) ctx.fail("{} must have a last dimension (the rows' width)", ctx.input_label(0));
        const Shape rows(x.shape.begin(), x.shape.end() - 1);
        if (ctx.input(1) != TensorType{x.dtype, rows}) {
          ctx.fail("{} must be {}{} (one factor a row of {})", ctx.input_label(1), dtype_safetensors_name(x.dtype),
                   format_shape(rows), ctx.input_label(0));
        }
        return std::vector<TensorType>{x};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        if (ctx.needs_input_grad(1)) {
          fail_user("{}: the factor of scale_rows is not differentiable", ctx.attrs().where());
        }
        return {ctx.op("scale_rows", {ctx.output_grad(0), ctx.input(1)}), std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t count = ctx.outputs[0].numel();
        const int64_t width = ctx.outputs[0].shape.back();
        return bind_floating(ctx, ctx.outputs[0].dtype, [count, width](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [count, width](const CpuKernelArgs& args) {
            const T* x = args.inputs[0].as<T>();
            const T* factor = args.inputs[1].as<T>();
            T* out = args.outputs[0].as<T>();
            for (int64_t i = 0; i < count; ++i) out[i] = x[i] * factor[i / width];
          };
        });
      },
      // as mul: core-op graphs 1e-6, one bf16 rounding 4e-3
      .backend_tolerance = BackendTolerance{.f32 = 1e-6, .bf16 = 4e-3},
  });
}

void register_fill(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "fill",
      .inputs = {},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.attrs.number("value");
        return std::vector<TensorType>{{dtype_attr(ctx.attrs), shape_attr(ctx.attrs)}};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t count = ctx.outputs[0].numel();
        double value = ctx.attrs.number("value");
        return bind_floating(ctx, ctx.outputs[0].dtype, [count, value](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [count, value](const CpuKernelArgs& args) {
            T* out = args.outputs[0].as<T>();
            for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(value);
          };
        });
      },
      // core-op graphs 1e-6 (test_cuda_backend.cpp), one bf16 rounding 4e-3 (test_model_kernels.cpp)
      .backend_tolerance = BackendTolerance{.f32 = 1e-6, .bf16 = 4e-3},
  });
}

void register_sum(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "sum",
      .inputs = {"x"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        return std::vector<TensorType>{{ctx.input(0).dtype, Shape{}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        return {ctx.op("broadcast", {ctx.output_grad(0)}, {{"shape", ctx.type(ctx.input(0)).shape}})};
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t count = ctx.inputs[0].numel();
        return bind_floating(ctx, ctx.outputs[0].dtype, [count](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [count](const CpuKernelArgs& args) {
            const T* x = args.inputs[0].as<T>();
            double total = 0.0;  // accumulate wide so float sums stay accurate
            for (int64_t i = 0; i < count; ++i) total += static_cast<double>(x[i]);
            args.outputs[0].as<T>()[0] = static_cast<T>(total);
          };
        });
      },
      // core-op graphs 1e-6 (test_cuda_backend.cpp), one bf16 rounding 4e-3 (test_model_kernels.cpp)
      .backend_tolerance = BackendTolerance{.f32 = 1e-6, .bf16 = 4e-3},
  });
}

void register_broadcast(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "broadcast",
      .inputs = {"scalar"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        if (ctx.input(0).numel() != 1) ctx.fail("{} must hold exactly one element", ctx.input_label(0));
        return std::vector<TensorType>{{ctx.input(0).dtype, shape_attr(ctx.attrs)}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        TensorId total = ctx.op("sum", {ctx.output_grad(0)});
        if (ctx.type(total).shape != ctx.type(ctx.input(0)).shape) {
          fail_user("{}: broadcast of a non-scalar one-element tensor is not differentiable", ctx.attrs().where());
        }
        return {total};
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t count = ctx.outputs[0].numel();
        return bind_floating(ctx, ctx.outputs[0].dtype, [count](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [count](const CpuKernelArgs& args) {
            T value = args.inputs[0].as<T>()[0];
            T* out = args.outputs[0].as<T>();
            for (int64_t i = 0; i < count; ++i) out[i] = value;
          };
        });
      },
      // core-op graphs 1e-6 (test_cuda_backend.cpp), one bf16 rounding 4e-3 (test_model_kernels.cpp)
      .backend_tolerance = BackendTolerance{.f32 = 1e-6, .bf16 = 4e-3},
  });
}

void register_accumulate(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "accumulate",
      .inputs = {"gradient"},
      .outputs = {"out"},
      .infer = same_as_first,
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t count = ctx.outputs[0].numel();
        return bind_floating(ctx, ctx.outputs[0].dtype, [count](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [count](const CpuKernelArgs& args) {
            const T* gradient = args.inputs[0].as<T>();
            T* out = args.outputs[0].as<T>();
            for (int64_t i = 0; i < count; ++i) out[i] += gradient[i];
          };
        });
      },
      .accumulates_into_output = true,
      // core-op graphs 1e-6 (test_cuda_backend.cpp), one bf16 rounding 4e-3 (test_model_kernels.cpp)
      .backend_tolerance = BackendTolerance{.f32 = 1e-6, .bf16 = 4e-3},
  });
}

// offload_to_host / fetch_from_host: the same bytes in another place (the planner puts the host
// copy in its host region).
void register_host_copy(OpRegistry& registry, const char* name) {
  registry.add(OpDef{
      .name = name,
      .inputs = {"x"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) { return std::vector<TensorType>{ctx.input(0)}; },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) -> CpuKernel {
        const size_t bytes = ctx.inputs[0].size_bytes();
        return [bytes](const CpuKernelArgs& args) { std::memcpy(args.outputs[0].data, args.inputs[0].data, bytes); };
      },
      // the same bytes in another place
      .backend_tolerance = BackendTolerance{.f32 = 0.0, .bf16 = 0.0},
  });
}

}  // namespace

void register_core_ops(OpRegistry& registry) {
  register_add(registry);
  register_mul(registry);
  register_scale(registry);
  register_scale_by(registry);
  register_scale_rows(registry);
  register_fill(registry);
  register_sum(registry);
  register_broadcast(registry);
  register_accumulate(registry);
  register_host_copy(registry, "offload_to_host");
  register_host_copy(registry, "fetch_from_host");
}

}  // namespace surogate::graph
