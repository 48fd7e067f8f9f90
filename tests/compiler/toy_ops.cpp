// Toy ops and the toy transformer used by engine tests (see toy_ops.h).
#include "compiler/toy_ops.h"

#include <cmath>

namespace surogate::testing {
namespace {

using namespace surogate::graph;

template <typename Body>
CpuKernel by_dtype(DType dtype, Body body) {
  if (dtype == DType::F64) return body(double{});
  return body(float{});
}

void register_matmul(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "toy_matmul",
      .inputs = {"a", "b"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_rank(0, 2);
        ctx.expect_rank(1, 2);
        bool ta = ctx.attrs.boolean_or("transpose_a", false), tb = ctx.attrs.boolean_or("transpose_b", false);
        int64_t m = ctx.input(0).shape[ta ? 1 : 0], k = ctx.input(0).shape[ta ? 0 : 1];
        int64_t k2 = ctx.input(1).shape[tb ? 1 : 0], n = ctx.input(1).shape[tb ? 0 : 1];
        if (k != k2) ctx.fail("inner dimensions differ: {} vs {}", ctx.input_label(0), ctx.input_label(1));
        if (ctx.input(0).dtype != ctx.input(1).dtype) ctx.fail("inputs must have the same dtype");
        return std::vector<TensorType>{{ctx.input(0).dtype, {m, n}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        bool ta = ctx.attrs().boolean_or("transpose_a", false), tb = ctx.attrs().boolean_or("transpose_b", false);
        SUROGATE_CHECK(!ta, "toy_matmul gradient supports transpose_b only");
        TensorId grad = ctx.output_grad(0);
        std::optional<TensorId> grad_a, grad_b;
        // out = a * op(b):  da = g * op(b)^T;  d op(b) = a^T * g
        if (ctx.needs_input_grad(0)) grad_a = ctx.op("toy_matmul", {grad, ctx.input(1)}, {{"transpose_b", !tb}});
        if (ctx.needs_input_grad(1)) {
          grad_b = tb ? ctx.op("toy_matmul", {grad, ctx.input(0)}, {{"transpose_a", true}})
                      : ctx.op("toy_matmul", {ctx.input(0), grad}, {{"transpose_a", true}});
        }
        return {grad_a, grad_b};
      },
      .cpu = [](const CpuBindContext& ctx) {
        bool ta = ctx.attrs.boolean_or("transpose_a", false), tb = ctx.attrs.boolean_or("transpose_b", false);
        int64_t m = ctx.outputs[0].shape[0], n = ctx.outputs[0].shape[1];
        int64_t k = ctx.inputs[0].shape[ta ? 0 : 1];
        return by_dtype(ctx.outputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            const T* a = args.inputs[0].as<T>();
            const T* b = args.inputs[1].as<T>();
            T* out = args.outputs[0].as<T>();
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                T total = 0;
                for (int64_t p = 0; p < k; ++p) {
                  T av = ta ? a[p * m + i] : a[i * k + p];
                  T bv = tb ? b[j * k + p] : b[p * n + j];
                  total += av * bv;
                }
                out[i * n + j] = total;
              }
            }
          };
        });
      },
  });
}

void register_tanh(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "toy_tanh",
      .inputs = {"x"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) { return std::vector<TensorType>{ctx.input(0)}; },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        return {ctx.op("toy_tanh_backward", {ctx.output(0), ctx.output_grad(0)})};
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t count = ctx.outputs[0].numel();
        return by_dtype(ctx.outputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            for (int64_t i = 0; i < count; ++i) args.outputs[0].as<T>()[i] = std::tanh(args.inputs[0].as<T>()[i]);
          };
        });
      },
  });
  registry.add(OpDef{
      .name = "toy_tanh_backward",
      .inputs = {"y", "dy"},
      .outputs = {"dx"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_same_type(0, 1);
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t count = ctx.outputs[0].numel();
        return by_dtype(ctx.outputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            const T* y = args.inputs[0].as<T>();
            const T* dy = args.inputs[1].as<T>();
            for (int64_t i = 0; i < count; ++i) args.outputs[0].as<T>()[i] = dy[i] * (T(1) - y[i] * y[i]);
          };
        });
      },
  });
}

void register_norm(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "toy_norm",
      .inputs = {"x"},
      .outputs = {"out", "rstd"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_rank(0, 2);
        return std::vector<TensorType>{ctx.input(0), {ctx.input(0).dtype, {ctx.input(0).shape[0]}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        return {ctx.op("toy_norm_backward", {ctx.input(0), ctx.output(1), ctx.output_grad(0)})};
      },
      .cpu = [](const CpuBindContext& ctx) {
        int64_t rows = ctx.inputs[0].shape[0], width = ctx.inputs[0].shape[1];
        double eps = ctx.attrs.number_or("eps", 1e-5);
        return by_dtype(ctx.outputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            const T* x = args.inputs[0].as<T>();
            T* out = args.outputs[0].as<T>();
            T* rstd = args.outputs[1].as<T>();
            for (int64_t r = 0; r < rows; ++r) {
              T squares = 0;
              for (int64_t c = 0; c < width; ++c) squares += x[r * width + c] * x[r * width + c];
              rstd[r] = T(1) / std::sqrt(squares / static_cast<T>(width) + static_cast<T>(eps));
              for (int64_t c = 0; c < width; ++c) out[r * width + c] = x[r * width + c] * rstd[r];
            }
          };
        });
      },
  });
  registry.add(OpDef{
      .name = "toy_norm_backward",
      .inputs = {"x", "rstd", "dy"},
      .outputs = {"dx"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_same_type(0, 2);
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t rows = ctx.inputs[0].shape[0], width = ctx.inputs[0].shape[1];
        return by_dtype(ctx.outputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            const T* x = args.inputs[0].as<T>();
            const T* rstd = args.inputs[1].as<T>();
            const T* dy = args.inputs[2].as<T>();
            T* dx = args.outputs[0].as<T>();
            for (int64_t r = 0; r < rows; ++r) {
              // y = x * s, s = (mean(x^2) + eps)^-1/2:  dx = s * dy - x * s^3 * mean(dy * x)
              T dot = 0;
              for (int64_t c = 0; c < width; ++c) dot += dy[r * width + c] * x[r * width + c];
              T s = rstd[r];
              for (int64_t c = 0; c < width; ++c) {
                dx[r * width + c] = s * dy[r * width + c] - x[r * width + c] * s * s * s * dot / static_cast<T>(width);
              }
            }
          };
        });
      },
  });
}

}  // namespace

void register_toy_ops(OpRegistry& registry) {
  register_matmul(registry);
  register_tanh(registry);
  register_norm(registry);
}

const OpRegistry& toy_registry() {
  static const OpRegistry registry = [] {
    OpRegistry built;
    register_core_ops(built);
    register_toy_ops(built);
    return built;
  }();
  return registry;
}

ToyModel build_toy_transformer(int layers, int64_t rows, int64_t width, int64_t hidden, DType dtype,
                               bool frozen_projections) {
  GraphBuilder b(toy_registry());
  TensorId x = b.input("x", dtype, {rows, width});
  TensorId target = b.input("target", dtype, {rows, width});
  for (int layer = 0; layer < layers; ++layer) {
    auto scope = b.scope("layers." + std::to_string(layer));
    bool trainable = !frozen_projections;
    TensorId wq = b.parameter("attn.q.weight", dtype, {width, width}, trainable);
    TensorId wo = b.parameter("attn.o.weight", dtype, {width, width});
    TensorId wg = b.parameter("mlp.gate.weight", dtype, {width, hidden}, trainable);
    TensorId wu = b.parameter("mlp.up.weight", dtype, {width, hidden}, trainable);
    TensorId wd = b.parameter("mlp.down.weight", dtype, {hidden, width});
    TensorId h, a;
    {
      auto group = b.recompute_group("rmsnorm");
      h = b.op("toy_norm", {x}, {{"eps", 1e-5}}, "ln1");
    }
    {
      auto group = b.recompute_group("qkv");
      a = b.op("toy_matmul", {h, wq}, {}, "attn.q");
    }
    {
      auto group = b.recompute_group("att");
      a = b.op("toy_tanh", {a}, {}, "attn.core");
    }
    {
      auto group = b.recompute_group("block:" + std::to_string(layer));
      a = b.op("toy_matmul", {a, wo}, {}, "attn.o");
    }
    x = b.op("add", {x, a}, {}, "residual1");
    {
      auto group = b.recompute_group("rmsnorm");
      h = b.op("toy_norm", {x}, {{"eps", 1e-5}}, "ln2");
    }
    TensorId gate, up, act;
    {
      auto group = b.recompute_group("ffn");
      gate = b.op("toy_matmul", {h, wg}, {}, "mlp.gate");
      up = b.op("toy_matmul", {h, wu}, {}, "mlp.up");
    }
    {
      auto group = b.recompute_group("swiglu");
      act = b.op("mul", {b.op("toy_tanh", {gate}, {}, "mlp.act"), up}, {}, "mlp.swiglu");
    }
    {
      auto group = b.recompute_group("block:" + std::to_string(layer));
      a = b.op("toy_matmul", {act, wd}, {}, "mlp.down");
    }
    x = b.op("add", {x, a}, {}, "residual2");
  }
  TensorId loss = b.op("sum", {b.op("mul", {x, target}, {}, "weighted")}, {}, "loss");
  b.mark_output(loss);
  return ToyModel{b.finish(), loss};
}

}  // namespace surogate::testing
