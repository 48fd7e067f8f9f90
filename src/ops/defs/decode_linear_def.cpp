// Graph ops of the decode step's fused products (generate/decode_fusion.h puts them into decode
// graphs of one or two rows; cuda/kernels/decode_gemv.h runs them on the GPU in one launch):
//   linear_group(x, w_0, .., w_{n-1}, addends...){addends: [n flags, 0 or 1]} -> (y_0, .., y_{n-1}):
//     y_i = x · w_iᵀ (+ addend_i where addends[i]), n = 2 or 3 weights [N_i, K] against one x
//     [..., K] (an attention layer's q, k and v); each output as linear / linear_add writes it;
//   linear_swiglu(x, gate, up, addends...){addends: [2 flags]} -> silu(g) · u with
//     g = x · gateᵀ (+ gate addend), u = x · upᵀ (+ up addend), each rounded to the graph's
//     dtype first, as the unfused linear, linear, swiglu chain rounds them.
// The addends (a LoRA adapter's outputs, [..., N_i]) follow the weights in order, only those marked.
// Forward only (`.gradient = {}`): decode graphs train nothing.
#include <vector>

#include "ops/defs/def_util.h"
#include "ops/linear.h"
#include "ops/swiglu.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

// The `addends` attribute: which of the `weights` weights take an addend (1) or not (0).
std::vector<bool> addend_flags(const Attrs& attrs, size_t weights) {
  std::vector<bool> flags(weights, false);
  if (!attrs.has("addends")) return flags;
  const std::vector<int64_t> list = attrs.integers("addends");
  if (list.size() != weights) fail_user("{}: 'addends' must flag {} weights, got {}", attrs.where(), weights, list.size());
  for (size_t i = 0; i < weights; ++i) flags[i] = list[i] != 0;
  return flags;
}

// The weight count: the length of `addends`, or (without it) every input after x.
size_t weight_count(const Attrs& attrs, size_t inputs) {
  return attrs.has("addends") ? attrs.integers("addends").size() : inputs - 1;
}

// x [..., K] · w [N, K]ᵀ -> [..., N]; the addend (when given) of exactly that type.
TensorType grouped_product_type(const InferContext& ctx, size_t weight, size_t addend) {
  ctx.expect_rank(weight, 2);
  ctx.expect_dim(0, -1, ctx.input(weight).shape[1]);
  if (ctx.input(weight).dtype != ctx.input(0).dtype) ctx.fail("{} must have the dtype of x", ctx.input_label(weight));
  Shape shape = ctx.input(0).shape;
  shape.back() = ctx.input(weight).shape[0];
  const TensorType result{ctx.input(0).dtype, shape};
  if (addend != 0 && ctx.input(addend) != result) {
    ctx.fail("{} must be {} (the product's type)", ctx.input_label(addend), format_type(result));
  }
  return result;
}

// The products' types in weight order; `weights` of them, after checking the input count.
std::vector<TensorType> grouped_types(const InferContext& ctx, size_t weights) {
  ctx.expect_floating(0);
  ctx.expect_min_rank(0, 1);
  const std::vector<bool> flags = addend_flags(ctx.attrs, weights);
  size_t next_addend = 1 + weights;
  std::vector<TensorType> types;
  for (size_t i = 0; i < weights; ++i) {
    if (next_addend + (flags[i] ? 1 : 0) > ctx.input_count()) break;
    types.push_back(grouped_product_type(ctx, 1 + i, flags[i] ? next_addend++ : 0));
  }
  if (types.size() != weights || next_addend != ctx.input_count()) {
    ctx.fail("takes x, {} weights and one addend per 'addends' flag set, got {} inputs", weights, ctx.input_count());
  }
  return types;
}

// The CPU product of weight i into `out`: linear_add's math with an addend, linear's without.
template <typename T>
void product(const CpuKernelArgs& args, size_t weight, const T* addend, int64_t rows, int64_t in, int64_t out, T* y) {
  if (addend != nullptr) {
    linear_add_forward(args.inputs[0].as<T>(), args.inputs[weight].as<T>(), addend, rows, in, out, y);
  } else {
    linear_forward(args.inputs[0].as<T>(), args.inputs[weight].as<T>(), static_cast<const T*>(nullptr), rows, in, out, y);
  }
}

// Where each weight's addend is among the inputs (0: none).
std::vector<size_t> addend_inputs(const std::vector<bool>& flags) {
  std::vector<size_t> indices;
  size_t next = 1 + flags.size();
  for (bool flag : flags) indices.push_back(flag ? next++ : 0);
  return indices;
}

void register_linear_group(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "linear_group",
      .inputs = {"x", "weight_0", "weight_1", "weight_2", "addends"},
      .outputs = {"out_0", "out_1", "out_2"},
      .infer = [](const InferContext& ctx) {
        const size_t weights = weight_count(ctx.attrs, ctx.input_count());
        if (weights < 2 || weights > 3) ctx.fail("linear_group takes 2 or 3 weights, got {}", weights);
        return grouped_types(ctx, weights);
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const size_t weights = weight_count(ctx.attrs, ctx.inputs.size());
        const std::vector<size_t> addends = addend_inputs(addend_flags(ctx.attrs, weights));
        const int64_t in = ctx.inputs[1].shape[1], rows = ctx.inputs[0].numel() / in;
        std::vector<int64_t> widths;
        for (size_t i = 0; i < weights; ++i) widths.push_back(ctx.inputs[1 + i].shape[0]);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            for (size_t i = 0; i < weights; ++i) {
              const T* addend = addends[i] != 0 ? args.inputs[addends[i]].as<T>() : nullptr;
              product<T>(args, 1 + i, addend, rows, in, widths[i], args.outputs[i].as<T>());
            }
          };
        });
      },
      .variadic_inputs = true,
      // linear's: bf16 products, fp32 accumulation (test_decode_gemv_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1e-2},
  });
}

void register_linear_swiglu(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "linear_swiglu",
      .inputs = {"x", "gate", "up", "addends"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        if (weight_count(ctx.attrs, 3) != 2) ctx.fail("linear_swiglu takes two weights (gate, up)");
        const std::vector<TensorType> types = grouped_types(ctx, 2);
        if (types[0] != types[1]) ctx.fail("{} and {} must have one shape", ctx.input_label(1), ctx.input_label(2));
        return std::vector<TensorType>{types[0]};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const std::vector<size_t> addends = addend_inputs(addend_flags(ctx.attrs, 2));
        const int64_t in = ctx.inputs[1].shape[1], ffn = ctx.inputs[1].shape[0], rows = ctx.inputs[0].numel() / in;
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            std::vector<T> gate(static_cast<size_t>(rows * ffn)), up(gate.size());
            for (size_t i = 0; i < 2; ++i) {
              const T* addend = addends[i] != 0 ? args.inputs[addends[i]].as<T>() : nullptr;
              product<T>(args, 1 + i, addend, rows, in, ffn, (i == 0 ? gate : up).data());
            }
            swiglu_forward(gate.data(), up.data(), rows, ffn, args.outputs[0].as<T>());
          };
        });
      },
      .variadic_inputs = true,
      // two bf16 products (1e-2) feeding swiglu's fp32 math and one more rounding
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1.5e-2},
  });
}

}  // namespace

void register_decode_linear_ops(OpRegistry& registry) {
  register_linear_group(registry);
  register_linear_swiglu(registry);
}

}  // namespace surogate::ops::defs
