// Graph op of an unmerged LoRA adapter's two products in a forward-only graph (models/lora.h puts
// it into decode graphs: generation and GRPO rollouts; cuda/kernels/low_rank_products.h runs it):
//   low_rank_products(x, a_0, .., a_{n-1}, b_0, .., b_{n-1}){scale} -> (out_0, .., out_{n-1}):
//     out_i = scale · (x · a_iᵀ) · b_iᵀ,  x [..., K], a_i [r_i, K], b_i [N_i, r_i], out_i [..., N_i],
//   n = 1 to 3 adapters that read the same x (q, k and v; gate and up). In a 16-bit graph the rank-r
//   product is rounded to the graph's dtype before the second one, as linear then linear{scale}
//   round it. Forward only (`.gradient = {}`): a training graph keeps the unfused products.
#include <algorithm>
#include <vector>

#include "ops/defs/def_util.h"
#include "ops/linear.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

// The adapter count: the inputs after x, half of them A and half B.
size_t adapter_count(const InferContext& ctx) {
  const size_t inputs = ctx.input_count();
  if (inputs < 3 || (inputs - 1) % 2 != 0 || (inputs - 1) / 2 > 3) {
    ctx.fail("takes x and 1 to 3 pairs of low-rank factors (a_0, .., b_0, ..), got {} inputs", inputs);
  }
  return (inputs - 1) / 2;
}

std::vector<TensorType> infer_low_rank_products(const InferContext& ctx) {
  ctx.expect_floating(0);
  ctx.expect_min_rank(0, 1);
  const size_t adapters = adapter_count(ctx);
  const int64_t in = ctx.input(0).shape.back();
  std::vector<TensorType> types;
  for (size_t i = 0; i < adapters; ++i) {
    const size_t a = 1 + i, b = 1 + adapters + i;
    const TensorType& a_type = ctx.input(a);
    const TensorType& b_type = ctx.input(b);
    if (a_type.dtype != ctx.input(0).dtype || b_type.dtype != ctx.input(0).dtype) {
      ctx.fail("a_{} (input {}, {}) and b_{} (input {}, {}) must have the dtype of x", i, a, format_type(a_type), i, b,
               format_type(b_type));
    }
    if (a_type.shape.size() != 2 || a_type.shape[1] != in) {
      ctx.fail("a_{} (input {}) must be [rank, {}] (x's last dimension), got {}", i, a, in, format_type(a_type));
    }
    if (b_type.shape.size() != 2 || b_type.shape[1] != a_type.shape[0]) {
      ctx.fail("b_{} (input {}) must be [width, {}] (a_{}'s rank), got {}", i, b, a_type.shape[0], i, format_type(b_type));
    }
    Shape shape = ctx.input(0).shape;
    shape.back() = b_type.shape[0];
    types.push_back(TensorType{ctx.input(0).dtype, shape});
  }
  return types;
}

}  // namespace

void register_low_rank_products_ops(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "low_rank_products",
      .inputs = {"x"},  // then a_0 .. a_{n-1}, b_0 .. b_{n-1} (variadic)
      .outputs = {"out_0", "out_1", "out_2"},
      .infer = infer_low_rank_products,
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const size_t adapters = (ctx.inputs.size() - 1) / 2;
        const int64_t in = ctx.inputs[1].shape[1], rows = ctx.inputs[0].numel() / in;
        const double scale = ctx.attrs.number_or("scale", 1.0);
        std::vector<int64_t> ranks, widths;
        for (size_t i = 0; i < adapters; ++i) {
          ranks.push_back(ctx.inputs[1 + i].shape[0]);
          widths.push_back(ctx.inputs[1 + adapters + i].shape[0]);
        }
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            for (size_t i = 0; i < adapters; ++i) {
              const int64_t rank = ranks[i], width = widths[i];
              std::vector<T> hidden(static_cast<size_t>(rows * rank));
              T* out = args.outputs[i].as<T>();
              std::fill(out, out + rows * width, T{0});
              lora_linear_forward(args.inputs[0].as<T>(), args.inputs[1 + i].as<T>(), args.inputs[1 + adapters + i].as<T>(),
                                  rows, in, rank, width, static_cast<T>(scale), hidden.data(), out);
            }
          };
        });
      },
      .variadic_inputs = true,
      // two bf16 products, the rank-r one rounded to bf16 before the second (as linear_swiglu's two
      // roundings; test_low_rank_products_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 1.5e-2},
  });
}

}  // namespace surogate::ops::defs
