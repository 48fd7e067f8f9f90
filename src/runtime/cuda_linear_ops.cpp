// CUDA binders for the linear family on BF16 and F16 graphs (T: the 16-bit element type;
// ops/defs/linear_def.cpp): linear (alpha =
// its scale), linear_add (scale·x·Wᵀ + c as one cuBLASLt product with a separate C, alpha = scale, beta = 1), their
// input gradients (linear_backward_input, linear_backward_input_add: scale·dy·W [+ c]), the weight gradient (bf16 out of
// an fp32 accumulation inside cuBLASLt; linear_backward_weight_accumulate adds it into the persistent
// gradient with beta = 1), linear_backward, linear_backward_low_rank(_accumulate) (both gradients of
// a narrow product from one pass over d_out, cuda/kernels/low_rank_backward.h) and bias_gradient. All products go
// through the plan's one Matmul (CudaResources::matmul, cuda/matmul.h), except linear's and
// linear_add's products of one or two rows (a decode step) where that is faster: cuda/kernels/decode_gemv.h
// and cuda/kernels/small_m_linear.h.
#include "cuda/kernels/decode_gemv.h"
#include "cuda/kernels/low_rank_backward.h"
#include "cuda/kernels/reductions.h"
#include "cuda/kernels/small_m_linear.h"
#include "cuda/matmul.h"
#include "runtime/cuda_bind_checks.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

namespace k = cuda;

// The product factor (attribute `scale`, default 1: the LoRA scaling on the B product and its
// backward ops) as cuBLASLt's alpha, rounded to float.
float alpha_of(const CudaBindContext& ctx) { return static_cast<float>(ctx.attrs.number_or("scale", 1.0)); }

// A decode step's product (at most kSmallMLinearMaxRows rows, both sides wider than LoRA's rank
// matrices, which stay on cuBLASLt): the GEMV-style kernel when the pointers allow its vector
// loads (checked per call, as a captured graph replays the same pointers), else cuBLASLt.
cuda::SmallMLinearShape small_m_shape(int64_t rows, int64_t out, int64_t in, float alpha) {
  return {.rows = rows, .out = out, .in = in, .alpha = alpha};
}
// Where it beats cuBLASLt (bench/small_m_linear_bench on an H200, 2026-11-29, Qwen3-8B's shapes):
// at 1 or 2 rows, on weights of at most 4096 x 4096 (q/o 1.02-1.04x, k/v 1.4x) and on the LM head
// (1.03x); not on the 12288-wide MLP products (0.88x), nor at 4 or more rows (down to 0.69x).
bool may_take_small_m(const cuda::SmallMLinearShape& shape) {
  constexpr int64_t kNarrowest = 256;  // LoRA's A [r, K] and B [N, r] products have r < 256
  constexpr int64_t kFastestRows = 2, kSquareWeights = 4096 * 4096, kLmHeadWidth = 32768;
  const bool faster = shape.out * shape.in <= kSquareWeights || shape.out >= kLmHeadWidth;
  return shape.rows >= 1 && shape.rows <= kFastestRows && faster && shape.out >= kNarrowest &&
         shape.in >= kNarrowest && shape.in % 8 == 0;
}

// Where the decode GEMV beats both (bench/decode_kernels_bench on an H200, 2026-11-29, Qwen3-8B's
// shapes, µs per graph-replayed launch): at one row every weight narrower than the LM head (q/o 10.99
// at 4 rows per block vs small_m 11.88; k/v 4.22 vs 8.52; gate or up 49.5 vs cuBLASLt 50.0 for both;
// down 25.92 at 4 vs cuBLASLt 30.53); at two rows the k/v-sized weights (4.5 vs 8.6) and the
// down-shaped ones, N < K (26.6 at 4 vs 29.6), not q/o nor gate/up. The LM head stays on small_m.
// At one row 8 rows a block for the 4096-wide ones (o_proj, down_proj; q/k/v go through
// linear_group): 0.9 and 0.5 µs faster in a whole Qwen3-8B layer than 4 (bench/decode_layer_bench,
// 2026-11-30; cuda_decode_linear_ops.cpp's group_rows_per_block tells what this once broke).
// Returns the rows per block, or 0 where the GEMV is not taken.
int decode_gemv_rows_per_block(int64_t rows, int64_t out, int64_t in) {
  constexpr int64_t kNarrowest = 256, kLmHeadWidth = 32768, kSquareWeights = 4096 * 4096, kWide = 4096;
  if (out < kNarrowest || in < kNarrowest || in % 8 != 0 || out >= kLmHeadWidth) return 0;
  if (rows == 1) return out >= kWide ? 8 : 2;
  if (rows == 2 && out < in) return 4;
  if (rows == 2 && out * in < kSquareWeights) return 2;
  return 0;
}

// A linear's decode GEMV, decided at bind time; the pointers' alignment is checked per call. Its
// launch overlaps the previous kernel (PDL) when the weight is a parameter, which nothing before it writes.
struct DecodeGemvRoute {
  cuda::DecodeGemvShape shape;
  int64_t out = 0;

  DecodeGemvRoute(const CudaBindContext& ctx, int64_t rows, int64_t out_features, int64_t in, float alpha)
      : shape{.rows = rows, .in = in, .alpha = alpha, .rows_per_block = decode_gemv_rows_per_block(rows, out_features, in),
              .overlap_previous = ctx.input_parameter(1)},
        out(out_features) {}

  bool taken() const { return shape.rows_per_block != 0; }

  // Runs it and returns true when taken and the pointers allow it.
  template <typename T>
  bool run(T* y, const T* x, const T* weight, const T* bias, const T* addend, cudaStream_t stream) const {
    const void* weights[1] = {weight};
    if (!taken() || !cuda::decode_gemv_supported(shape, x, weights, 1)) return false;
    const cuda::DecodeGemvWeight<T> product{.weight = weight, .out = y, .rows = out, .bias = bias, .addend = addend};
    cuda::decode_gemv(&product, 1, x, shape, stream);
    return true;
  }
};

template <typename T>
CudaKernel bind_linear_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  const int64_t in = ctx.inputs[1].shape[1], out = ctx.inputs[1].shape[0], rows = ctx.inputs[0].numel() / in;
  const bool has_bias = ctx.inputs.size() == 3;
  cuda::MatmulShape shape{.m = rows, .n = out, .k = in, .transpose_b = true, .has_bias = has_bias};
  const float alpha = alpha_of(ctx);
  const cuda::SmallMLinearShape small = small_m_shape(rows, out, in, alpha);
  const bool may_be_small = may_take_small_m(small);
  const DecodeGemvRoute gemv(ctx, rows, out, in, alpha);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    const T* x = args.inputs[0].as<const T>();
    const T* weight = args.inputs[1].as<const T>();
    const T* bias = has_bias ? args.inputs[2].as<const T>() : nullptr;
    if (gemv.run(args.outputs[0].as<T>(), x, weight, bias, static_cast<const T*>(nullptr), args.stream)) return;
    if (may_be_small && cuda::small_m_linear_supported(small, x, weight)) {
      cuda::small_m_linear(args.outputs[0].as<T>(), x, weight, bias, static_cast<const T*>(nullptr), small, args.stream);
      return;
    }
    resources->matmul().run(shape, args.outputs[0].data, x, weight, bias, args.stream, alpha);
  };
}
CudaKernel bind_linear(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_linear_typed<T>(ctx); });
}

// One cuBLASLt product of inputs 0 and 1 into output 0, alpha = the node's scale; with
// shape.has_addend, input 2 is cuBLASLt's C (beta = 1, C ≠ D); with shape.accumulate, output 0
// is (beta = 1, C = D). fp32 accumulation, rounded to bf16 once.
template <typename T>
CudaKernel bind_product(const CudaBindContext& ctx, const cuda::MatmulShape& shape) {
  const float alpha = alpha_of(ctx);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    resources->matmul().run(shape, args.outputs[0].data, args.inputs[0].as<const T>(), args.inputs[1].as<const T>(),
                            nullptr, args.stream, alpha, shape.has_addend ? args.inputs[2].data : nullptr);
  };
}

// d_x [rows, in] = d_out [rows, out] · W [out, in]
cuda::MatmulShape input_gradient_shape(int64_t rows, int64_t out, int64_t in) {
  return cuda::MatmulShape{.m = rows, .n = in, .k = out};
}
// d_W [out, in] = d_outᵀ · x, bf16 result of an fp32 accumulation
cuda::MatmulShape weight_gradient_shape(int64_t rows, int64_t out, int64_t in) {
  return cuda::MatmulShape{.m = out, .n = in, .k = rows, .transpose_a = true};
}

// linear_add (x, W, addend){scale} -> scale·x·Wᵀ + addend, the addend as C.
// A decode step's adapted projection takes the decode GEMV or the small-M kernel as linear does.
template <typename T>
CudaKernel bind_linear_add_typed(const CudaBindContext& ctx) {
  ctx.expect_all(element_dtype<T>());
  const int64_t in = ctx.inputs[1].shape[1], out = ctx.inputs[1].shape[0], rows = ctx.inputs[0].numel() / in;
  const cuda::MatmulShape shape{.m = rows, .n = out, .k = in, .transpose_b = true, .has_addend = true};
  const cuda::SmallMLinearShape small = small_m_shape(rows, out, in, alpha_of(ctx));
  const DecodeGemvRoute gemv(ctx, rows, out, in, alpha_of(ctx));
  const bool may_be_small = may_take_small_m(small);
  if (!may_be_small && !gemv.taken()) return bind_product<T>(ctx, shape);
  const CudaKernel product = bind_product<T>(ctx, shape);
  return [=](const CudaKernelArgs& args) {
    const T* x = args.inputs[0].as<const T>();
    const T* weight = args.inputs[1].as<const T>();
    const T* addend = args.inputs[2].as<const T>();
    if (gemv.run(args.outputs[0].as<T>(), x, weight, static_cast<const T*>(nullptr), addend, args.stream)) return;
    if (!may_be_small || !cuda::small_m_linear_supported(small, x, weight)) return product(args);
    cuda::small_m_linear(args.outputs[0].as<T>(), x, weight, static_cast<const T*>(nullptr), addend, small, args.stream);
  };
}
CudaKernel bind_linear_add(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_linear_add_typed<T>(ctx); });
}

// linear_backward_input (d_out, W){scale} -> scale·d_out·W; its _add form (d_out, W, addend) adds
// the addend (a fan-out's earlier gradient contributions) as C.
template <typename T>
CudaKernel bind_linear_backward_input_typed(const CudaBindContext& ctx, bool has_addend) {
  if (has_addend) ctx.expect_all(element_dtype<T>());
  else expect_in(ctx, 0, element_dtype<T>());
  const int64_t out = ctx.inputs[1].shape[0], in = ctx.inputs[1].shape[1], rows = ctx.inputs[0].numel() / out;
  cuda::MatmulShape shape = input_gradient_shape(rows, out, in);
  shape.has_addend = has_addend;
  return bind_product<T>(ctx, shape);
}
CudaKernel bind_linear_backward_input(const CudaBindContext& ctx, bool has_addend) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() {
    return bind_linear_backward_input_typed<T>(ctx, has_addend);
  });
}

// linear_backward_weight (d_out, x){scale} -> scale·d_outᵀ·x; its _accumulate form adds it into
// the persistent bf16 gradient (cuBLASLt's C and D, beta = 1), one rounding of the fp32 sum.
template <typename T>
CudaKernel bind_linear_backward_weight_typed(const CudaBindContext& ctx, bool accumulate) {
  if (accumulate) ctx.expect_all(element_dtype<T>());
  else expect_in(ctx, 0, element_dtype<T>());
  const int64_t out = last(ctx.inputs[0]), in = last(ctx.inputs[1]), rows = ctx.inputs[1].numel() / in;
  cuda::MatmulShape shape = weight_gradient_shape(rows, out, in);
  shape.accumulate = accumulate;
  return bind_product<T>(ctx, shape);
}
CudaKernel bind_linear_backward_weight(const CudaBindContext& ctx, bool accumulate) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() {
    return bind_linear_backward_weight_typed<T>(ctx, accumulate);
  });
}

// linear_backward (d_out, x, weight) -> (d_x, d_weight)
template <typename T>
CudaKernel bind_linear_backward_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  const int64_t out = ctx.inputs[2].shape[0], in = ctx.inputs[2].shape[1], rows = ctx.inputs[1].numel() / in;
  cuda::MatmulShape input_shape = input_gradient_shape(rows, out, in), weight_shape = weight_gradient_shape(rows, out, in);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    resources->matmul().run(input_shape, args.outputs[0].data, args.inputs[0].as<const T>(),
                            args.inputs[2].as<const T>(), nullptr, args.stream);
    resources->matmul().run(weight_shape, args.outputs[1].data, args.inputs[0].as<const T>(),
                            args.inputs[1].as<const T>(), nullptr, args.stream);
  };
}
CudaKernel bind_linear_backward(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_linear_backward_typed<T>(ctx); });
}

// linear_backward_low_rank(_accumulate) (d_out [rows, N], x [rows, r], W [N, r]){scale} ->
// (d_x = scale·d_out·W, d_W (+)= scale·d_outᵀ·x): the fused kernel (one pass over d_out) when
// it takes the shape and the pointers, else the two matmuls.
template <typename T>
CudaKernel bind_linear_backward_low_rank_typed(const CudaBindContext& ctx, bool accumulate) {
  ctx.expect_all(element_dtype<T>());
  const int64_t out = ctx.inputs[2].shape[0], in = ctx.inputs[2].shape[1], rows = ctx.inputs[1].numel() / in;
  const float alpha = alpha_of(ctx);
  const cuda::LowRankBackwardShape fused{.tokens = rows, .columns = out, .rank = static_cast<int>(in), .scale = alpha,
                                         .accumulate = accumulate};
  // The kernel's ranks and width rule; the pointers' alignment is checked per call.
  const bool may_fuse = (in == 16 || in == 32) && out % 8 == 0 && rows > 0;
  ScratchLayout scratch;
  const size_t workspace = may_fuse ? scratch.take(sizeof(float) * cuda::low_rank_backward_workspace_floats(fused)) : 0;
  ctx.resources.reserve_scratch(scratch.bytes);
  cuda::MatmulShape input_shape = input_gradient_shape(rows, out, in), weight_shape = weight_gradient_shape(rows, out, in);
  weight_shape.accumulate = accumulate;
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    const T* d_out = args.inputs[0].as<const T>();
    const T* x = args.inputs[1].as<const T>();
    const T* weight = args.inputs[2].as<const T>();
    if (may_fuse && cuda::low_rank_backward_supported(fused, d_out, x, weight)) {
      cuda::low_rank_backward(args.outputs[0].as<T>(), args.outputs[1].as<T>(),
                              scratch_at<float>(resources, workspace), d_out, x, weight, fused, args.stream);
      return;
    }
    resources->matmul().run(input_shape, args.outputs[0].data, d_out, weight, nullptr, args.stream, alpha);
    resources->matmul().run(weight_shape, args.outputs[1].data, d_out, x, nullptr, args.stream, alpha);
  };
}
CudaKernel bind_linear_backward_low_rank(const CudaBindContext& ctx, bool accumulate) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() {
    return bind_linear_backward_low_rank_typed<T>(ctx, accumulate);
  });
}

template <typename T>
CudaKernel bind_bias_gradient_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  const int64_t columns = last(ctx.inputs[0]), rows = ctx.inputs[0].numel() / columns;
  return [=](const CudaKernelArgs& args) {
    k::bias_gradient(args.outputs[0].as<T>(), args.inputs[0].as<const T>(), rows, columns, args.stream);
  };
}
CudaKernel bind_bias_gradient(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_bias_gradient_typed<T>(ctx); });
}

}  // namespace

void register_linear_cuda_ops(CudaOpTable& table) {
  table.add("linear", bind_linear);
  table.add("linear_add", bind_linear_add);
  table.add("linear_backward_input", [](const CudaBindContext& ctx) { return bind_linear_backward_input(ctx, false); });
  table.add("linear_backward_input_add",
            [](const CudaBindContext& ctx) { return bind_linear_backward_input(ctx, true); });
  table.add("linear_backward_weight", [](const CudaBindContext& ctx) { return bind_linear_backward_weight(ctx, false); });
  table.add("linear_backward_weight_accumulate",
            [](const CudaBindContext& ctx) { return bind_linear_backward_weight(ctx, true); });
  table.add("linear_backward", bind_linear_backward);
  table.add("linear_backward_low_rank",
            [](const CudaBindContext& ctx) { return bind_linear_backward_low_rank(ctx, false); });
  table.add("linear_backward_low_rank_accumulate",
            [](const CudaBindContext& ctx) { return bind_linear_backward_low_rank(ctx, true); });
  table.add("bias_gradient", bind_bias_gradient);
}

}  // namespace surogate::runtime
