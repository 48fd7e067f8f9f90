// Graph op "linear" (x [..., in], weight [out, in] [, bias [out]] -> [..., out], torch's layout)
// over ops/linear.h, with split backward ops so a frozen weight (LoRA base) costs no d_W GEMM:
//   linear_backward_input(d_out, weight)  -> d_x     [..., in]
//   linear_backward_weight(d_out, x)      -> d_weight [out, in]   (zero-filled, then += d_outᵀ·x)
//   bias_gradient(d_out)                  -> d_bias   [out]       (column sums, double accumulation)
// "linear_backward"(d_out, x, weight) -> (d_x, d_weight) stays registered for JSON IR graphs
// that name it; the gradient rule emits the split ops.
//
// linear takes an optional product factor `scale` (default 1; not with a bias): LoRA's B product
// in low-precision graphs, scale·u·Bᵀ.
// "linear_add"(x, weight, addend){scale = 1} -> scale·x·Wᵀ + addend (addend has out's type): the
// LoRA rewrite's adapted projection in low-precision graphs, the frozen base product with the
// adapter's output as a separate addend (one matmul, beta = 1) instead of a product and an add.
// Its gradients: d_x and d_weight as linear's times scale, d_addend = d_out itself.
//   linear_backward_input_add(d_out, weight, addend){scale = 1} -> scale·d_out·W + addend
// linear_backward_input and linear_backward_weight take the same optional `scale` on their product.
// "linear_backward_low_rank"(d_out, x, weight){scale} -> (scale·d_out·W, scale·d_outᵀ·x): both
// gradients of linear_add from one pass over d_out, for a narrow x (LoRA's B product, x the rank-r
// tensor); the rule of linear / linear_add emits it when the node has `fused_backward`
// (models::LoraOptions) and x has no other consumer. Its "_accumulate" form adds d_weight into the
// persistent gradient (autodiff).
// "linear_backward_weight_accumulate"(d_out, x){scale} -> d_weight += scale·d_outᵀ·x: autodiff's
// form of a low-precision parameter gradient that is one weight product (LoRA's A and B), written
// straight into the persistent gradient instead of a temporary plus an accumulate node.
// In low-precision graphs (not F32 / F64) the input gradient of linear and linear_add takes the
// contributions x already has from its other consumers (GradientContext::take_pending_input_grad)
// as that addend, so autodiff's fan-out add disappears into the matmul. F32 / F64 graphs (the
// CPU backend, gradient checks) keep the separate product and add, bit for bit as before.
#include <algorithm>
#include <vector>

#include "ops/defs/def_util.h"
#include "ops/linear.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

void expect_weight(const InferContext& ctx, size_t index, size_t reference) {
  ctx.expect_rank(index, 2);
  if (ctx.input(index).dtype != ctx.input(reference).dtype) {
    ctx.fail("{} must have the dtype of {}", ctx.input_label(index), ctx.input_label(reference));
  }
}

bool folds_gradient_sums(DType dtype) { return dtype != DType::F32 && dtype != DType::F64; }

// The product factor of linear_add and the backward ops (attribute `scale`, default 1).
double product_scale(const Attrs& attrs) { return attrs.number_or("scale", 1.0); }

// {"scale": s} for the backward ops of a node with product factor s (nothing when s is 1).
nlohmann::json scale_attrs(double scale) {
  return scale == 1.0 ? nlohmann::json::object() : nlohmann::json{{"scale", scale}};
}

// d_x = scale · d_out · W for input 0 of linear / linear_add (weight is input 1), with x's pending
// gradient contributions as the addend in low-precision graphs.
TensorId input_gradient(GradientContext& ctx, TensorId d_out, double scale = 1.0) {
  if (folds_gradient_sums(ctx.type(d_out).dtype)) {
    if (auto pending = ctx.take_pending_input_grad(0)) {
      return ctx.op("linear_backward_input_add", {d_out, ctx.input(1), *pending}, scale_attrs(scale));
    }
  }
  return ctx.op("linear_backward_input", {d_out, ctx.input(1)}, scale_attrs(scale));
}

// out[i] = scale · out[i] (+ addend[i]): the CPU ops' product factor, applied after the product.
template <typename T>
void scale_product(T* out, int64_t count, double scale, const T* addend) {
  const T factor = static_cast<T>(scale);
  for (int64_t i = 0; i < count; ++i) out[i] = out[i] * factor + (addend != nullptr ? addend[i] : T(0));
}

// x [..., in] · weight [out, in]ᵀ: the output type [..., out].
TensorType product_type(const InferContext& ctx) {
  ctx.expect_floating(0);
  ctx.expect_min_rank(0, 1);
  expect_weight(ctx, 1, 0);
  ctx.expect_dim(0, -1, ctx.input(1).shape[1]);
  Shape shape = ctx.input(0).shape;
  shape.back() = ctx.input(1).shape[0];
  return {ctx.input(0).dtype, shape};
}

// d_out [..., out] · weight [out, in]: the input-gradient type [..., in].
TensorType input_gradient_type(const InferContext& ctx) {
  ctx.expect_floating(0);
  expect_weight(ctx, 1, 0);
  ctx.expect_dim(0, -1, ctx.input(1).shape[0]);
  Shape shape = ctx.input(0).shape;
  shape.back() = ctx.input(1).shape[1];
  return {ctx.input(0).dtype, shape};
}

// d_out [..., out]ᵀ · x [..., in]: the weight-gradient type [out, in].
std::vector<TensorType> weight_gradient_type(const InferContext& ctx) {
  ctx.expect_floating(0);
  ctx.expect_min_rank(0, 1);
  ctx.expect_min_rank(1, 1);
  if (ctx.input(1).dtype != ctx.input(0).dtype) ctx.fail("{} must have the dtype of d_out", ctx.input_label(1));
  if (ctx.input(0).numel() / last_dim(ctx.input(0)) != ctx.input(1).numel() / last_dim(ctx.input(1))) {
    ctx.fail("{} and {} must have the same number of rows", ctx.input_label(0), ctx.input_label(1));
  }
  return {{ctx.input(0).dtype, Shape{last_dim(ctx.input(0)), last_dim(ctx.input(1))}}};
}

// CPU kernel of linear_backward_weight(_accumulate): d_weight [out, in] = scale · d_outᵀ · x,
// written into output 0, or added to what it holds (accumulate: the product is formed apart first).
CpuKernel bind_weight_gradient(const CpuBindContext& ctx, bool accumulate) {
  const int64_t out = last_dim(ctx.inputs[0]), in = last_dim(ctx.inputs[1]), rows = ctx.inputs[1].numel() / in;
  const double scale = product_scale(ctx.attrs);
  return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
    using T = decltype(zero);
    return [=](const CpuKernelArgs& args) {
      T* d_weight = args.outputs[0].as<T>();
      std::vector<T> product;
      if (accumulate) product.assign(static_cast<size_t>(out * in), T(0));
      else zero_fill(args.outputs[0]);
      T* target = accumulate ? product.data() : d_weight;
      linear_backward<T>(args.inputs[0].as<T>(), args.inputs[1].as<T>(), nullptr, rows, in, out, nullptr, target,
                         nullptr);
      if (accumulate) {
        scale_product(target, out * in, scale, static_cast<const T*>(d_weight));
        std::copy(product.begin(), product.end(), d_weight);
      } else if (scale != 1.0) {
        scale_product(target, out * in, scale, static_cast<const T*>(nullptr));
      }
    };
  });
}

// (d_out [..., out], x [..., in], weight [out, in]) -> (d_x: x's type, d_weight: weight's type).
std::vector<TensorType> both_gradients_type(const InferContext& ctx) {
  ctx.expect_floating(1);
  expect_weight(ctx, 2, 1);
  ctx.expect_dim(1, -1, ctx.input(2).shape[1]);
  Shape shape = ctx.input(1).shape;
  shape.back() = ctx.input(2).shape[0];
  if (ctx.input(0) != TensorType{ctx.input(1).dtype, shape}) {
    ctx.fail("{} must be {}", ctx.input_label(0), format_type({ctx.input(1).dtype, shape}));
  }
  return {ctx.input(1), ctx.input(2)};
}

// CPU kernel of linear_backward_low_rank(_accumulate): d_x = scale · d_out · W (written) and
// d_weight = scale · d_outᵀ · x (written, or added to what it holds).
CpuKernel bind_both_gradients(const CpuBindContext& ctx, bool accumulate) {
  const int64_t out = ctx.inputs[2].shape[0], in = ctx.inputs[2].shape[1], rows = ctx.inputs[1].numel() / in;
  const double scale = product_scale(ctx.attrs);
  return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
    using T = decltype(zero);
    return [=](const CpuKernelArgs& args) {
      T* d_x = args.outputs[0].as<T>();
      T* d_weight = args.outputs[1].as<T>();
      std::vector<T> product(static_cast<size_t>(out * in), T(0));
      linear_backward<T>(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(), rows, in, out, d_x,
                         product.data(), nullptr);
      scale_product(d_x, rows * in, scale, static_cast<const T*>(nullptr));
      scale_product(product.data(), out * in, scale, accumulate ? static_cast<const T*>(d_weight) : nullptr);
      std::copy(product.begin(), product.end(), d_weight);
    };
  });
}

// Gradients of the product inputs (x, weight) of linear / linear_add with product factor `scale`.
// With `fused_backward` (LoRA's B product, low-precision graphs) both come from one pass over d_out
// (linear_backward_low_rank) when x has no other consumer.
void product_gradients(GradientContext& ctx, TensorId d_out, InputGradients& result) {
  const double scale = product_scale(ctx.attrs());
  if (ctx.attrs().boolean_or("fused_backward", false) && folds_gradient_sums(ctx.type(d_out).dtype) &&
      ctx.needs_input_grad(0) && ctx.needs_input_grad(1)) {
    if (std::optional<TensorId> pending = ctx.take_pending_input_grad(0)) {  // x has other consumers
      result[0] = ctx.op("linear_backward_input_add", {d_out, ctx.input(1), *pending}, scale_attrs(scale));
      result[1] = ctx.op("linear_backward_weight", {d_out, ctx.input(0)}, scale_attrs(scale));
      return;
    }
    OpOutputs both = ctx.op("linear_backward_low_rank", {d_out, ctx.input(0), ctx.input(1)}, scale_attrs(scale));
    result[0] = both[0];
    result[1] = both[1];
    return;
  }
  if (ctx.needs_input_grad(0)) result[0] = input_gradient(ctx, d_out, scale);
  if (ctx.needs_input_grad(1)) result[1] = ctx.op("linear_backward_weight", {d_out, ctx.input(0)}, scale_attrs(scale));
}

void expect_addend(const InferContext& ctx, size_t index, const TensorType& result) {
  if (ctx.input(index) != result) ctx.fail("{} must be {} (the product's type)", ctx.input_label(index), format_type(result));
}

void register_linear(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "linear",
      .inputs = {"x", "weight", "bias"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        if (ctx.input_count() != 2 && ctx.input_count() != 3) {
          ctx.fail("linear takes x, weight and an optional bias, got {} inputs", ctx.input_count());
        }
        TensorType result = product_type(ctx);
        if (ctx.input_count() == 3) {
          ctx.expect_rank(2, 1);
          ctx.expect_dim(2, 0, ctx.input(1).shape[0]);
          if (ctx.input(2).dtype != ctx.input(0).dtype) ctx.fail("{} must have the dtype of x", ctx.input_label(2));
          if (product_scale(ctx.attrs) != 1.0) ctx.fail("a linear with a bias takes no scale");
        }
        return std::vector<TensorType>{result};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        TensorId d_out = ctx.output_grad(0);
        InputGradients result(ctx.node().inputs.size());
        product_gradients(ctx, d_out, result);
        if (result.size() == 3 && ctx.needs_input_grad(2)) result[2] = ctx.op("bias_gradient", {d_out});
        return result;
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t out = ctx.inputs[1].shape[0], in = ctx.inputs[1].shape[1], rows = ctx.inputs[0].numel() / in;
        bool has_bias = ctx.inputs.size() == 3;
        const double scale = product_scale(ctx.attrs);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            linear_forward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), has_bias ? args.inputs[2].as<T>() : nullptr,
                           rows, in, out, args.outputs[0].as<T>());
            if (scale != 1.0) scale_product(args.outputs[0].as<T>(), rows * out, scale, static_cast<const T*>(nullptr));
          };
        });
      },
      .variadic_inputs = true,
      // bf16 products, fp32 accumulation: 1e-2 (test_model_kernels.cpp, tests/cuda/test_matmul.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "linear_add",
      .inputs = {"x", "weight", "addend"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        TensorType result = product_type(ctx);
        expect_addend(ctx, 2, result);
        return std::vector<TensorType>{result};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        TensorId d_out = ctx.output_grad(0);
        InputGradients result(3);
        result[2] = if_needed(ctx, 2, d_out);
        product_gradients(ctx, d_out, result);
        return result;
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t out = ctx.inputs[1].shape[0], in = ctx.inputs[1].shape[1], rows = ctx.inputs[0].numel() / in;
        const double scale = product_scale(ctx.attrs);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            if (scale == 1.0) {
              linear_add_forward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(), rows, in, out,
                                 args.outputs[0].as<T>());
              return;
            }
            linear_forward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), static_cast<const T*>(nullptr), rows, in, out,
                           args.outputs[0].as<T>());
            scale_product(args.outputs[0].as<T>(), rows * out, scale, args.inputs[2].as<T>());
          };
        });
      },
      // bf16 products, fp32 accumulation: 1e-2 (test_model_kernels.cpp, tests/cuda/test_matmul.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "linear_backward_input_add",
      .inputs = {"d_out", "weight", "addend"},
      .outputs = {"d_x"},
      .infer = [](const InferContext& ctx) {
        TensorType result = input_gradient_type(ctx);
        expect_addend(ctx, 2, result);
        return std::vector<TensorType>{result};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t out = ctx.inputs[1].shape[0], in = ctx.inputs[1].shape[1], rows = ctx.inputs[0].numel() / out;
        const double scale = product_scale(ctx.attrs);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            if (scale == 1.0) {
              linear_input_gradient_add(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(), rows,
                                        in, out, args.outputs[0].as<T>());
              return;
            }
            linear_backward<T>(args.inputs[0].as<T>(), nullptr, args.inputs[1].as<T>(), rows, in, out,
                               args.outputs[0].as<T>(), nullptr, nullptr);
            scale_product(args.outputs[0].as<T>(), rows * in, scale, args.inputs[2].as<T>());
          };
        });
      },
      // bf16 products, fp32 accumulation: 1e-2 (test_model_kernels.cpp, tests/cuda/test_matmul.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "linear_backward_input",
      .inputs = {"d_out", "weight"},
      .outputs = {"d_x"},
      .infer = [](const InferContext& ctx) { return std::vector<TensorType>{input_gradient_type(ctx)}; },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t out = ctx.inputs[1].shape[0], in = ctx.inputs[1].shape[1], rows = ctx.inputs[0].numel() / out;
        const double scale = product_scale(ctx.attrs);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            linear_backward<T>(args.inputs[0].as<T>(), nullptr, args.inputs[1].as<T>(), rows, in, out,
                               args.outputs[0].as<T>(), nullptr, nullptr);
            if (scale != 1.0) scale_product(args.outputs[0].as<T>(), rows * in, scale, static_cast<const T*>(nullptr));
          };
        });
      },
      // bf16 products, fp32 accumulation: 1e-2 (test_model_kernels.cpp, tests/cuda/test_matmul.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "linear_backward_weight",
      .inputs = {"d_out", "x"},
      .outputs = {"d_weight"},
      .infer = weight_gradient_type,
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) { return bind_weight_gradient(ctx, false); },
      // bf16 products, fp32 accumulation: 1e-2 (test_model_kernels.cpp, tests/cuda/test_matmul.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "linear_backward_weight_accumulate",
      .inputs = {"d_out", "x"},
      .outputs = {"d_weight"},
      .infer = weight_gradient_type,
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) { return bind_weight_gradient(ctx, true); },
      .accumulates_into_output = true,
      // bf16 products, fp32 accumulation: 1e-2 (test_model_kernels.cpp, tests/cuda/test_matmul.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "linear_backward",
      .inputs = {"d_out", "x", "weight"},
      .outputs = {"d_x", "d_weight"},
      .infer = both_gradients_type,
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t out = ctx.inputs[2].shape[0], in = ctx.inputs[2].shape[1], rows = ctx.inputs[1].numel() / in;
        return bind_floating(ctx, ctx.inputs[1].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            zero_fill(args.outputs[1]);
            linear_backward<T>(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(), rows, in, out,
                               args.outputs[0].as<T>(), args.outputs[1].as<T>(), nullptr);
          };
        });
      },
      // bf16 products, fp32 accumulation: 1e-2 (test_model_kernels.cpp, tests/cuda/test_matmul.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "linear_backward_low_rank",
      .inputs = {"d_out", "x", "weight"},
      .outputs = {"d_x", "d_weight"},
      .infer = both_gradients_type,
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) { return bind_both_gradients(ctx, false); },
      // bf16 products, fp32 accumulation: 1e-2 (test_model_kernels.cpp, tests/cuda/test_matmul.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "linear_backward_low_rank_accumulate",
      .inputs = {"d_out", "x", "weight"},
      .outputs = {"d_x", "d_weight"},
      .infer = both_gradients_type,
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) { return bind_both_gradients(ctx, true); },
      .accumulates_into_output = true,
      // bf16 products, fp32 accumulation: 1e-2 (test_model_kernels.cpp, tests/cuda/test_matmul.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "bias_gradient",
      .inputs = {"d_out"},
      .outputs = {"d_bias"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_floating(0);
        ctx.expect_min_rank(0, 1);
        return std::vector<TensorType>{{ctx.input(0).dtype, Shape{last_dim(ctx.input(0))}}};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t width = last_dim(ctx.inputs[0]), rows = ctx.inputs[0].numel() / width;
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            const T* d_out = args.inputs[0].as<T>();
            T* d_bias = args.outputs[0].as<T>();
            for (int64_t column = 0; column < width; ++column) {
              double total = 0.0;
              for (int64_t row = 0; row < rows; ++row) total += static_cast<double>(d_out[row * width + column]);
              d_bias[column] = static_cast<T>(total);
            }
          };
        });
      },
      // fp32 column sums, one bf16 rounding: 4e-3 (test_model_kernels.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 4e-3},
  });
}

}  // namespace

void register_linear_ops(OpRegistry& registry) { register_linear(registry); }

}  // namespace surogate::ops::defs
