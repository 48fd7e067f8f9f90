// The fp8_hybrid recipe's graph ops (models/fp8_recipe.h inserts them), with CPU kernels that
// emulate the recipe exactly (the CUDA kernels are tested against them, runtime/cuda_fp8_ops.cpp):
//
//   quantize_fp8(x [, state]){format, site} -> (q [x's shape, F8_E4M3 / F8_E5M2], scale_inv F32[1])
//     q = fp8_encode(x · scale) (quant/fp8.h), scale = fp8_scale(amax): with a state tensor
//     (training), delayed scaling from row `site` (quant/fp8_scaling.h: row[0] once a step has been
//     recorded, x's own amax before), recording x's amax; without (evaluation), x's own amax. No
//     gradient (the recipe's matmuls carry x's gradient, below).
//
//   quantize_fp8_weight(w [out, in]) -> (codes F8_E4M3 [out, in], codes_t [in, out], scale_inv F32[1])
//     a weight in the per-tensor format at its own amax (ops/fp8_tensor.h): the QLoRA base, which
//     is dequantized per micro-batch, quantized for the FP8 product. No gradient (frozen).
//
//   linear_fp8(x, xq, x_scale_inv, w, w_t, w_scale_inv [, bias | addend] [, state] [, weight])
//            {extra: "bias" | "addend" (absent: neither), grad_site, grad_format, trained_weight}
//     -> out [..., out_features] in x's dtype:
//     (Σ_k decode(xq)·decode(w)) · (x_scale_inv · w_scale_inv) (+ bias | + addend), w E4M3
//     [out, in] and w_t its transpose [in, out] (what the backward's product reads: FP8 tensor-core
//     products take both operands K-major). x itself is not read: it is the input the gradient
//     flows to. The state (with grad_site) is the backward's. With trained_weight, the last input
//     is the trained weight [out, in] in x's dtype, of which w, w_t and w_scale_inv are the FP8
//     copy (made once per optimizer step by the training device, train/fp8_weight_copies.h); it is
//     not read either: it is the parameter its gradient flows to.
//     Gradients: d_x = linear_fp8_backward_input(d_out, w_t, w_scale_inv, state [, x's pending
//     gradient]) when the weight needs none; (d_x, d_weight) = linear_fp8_backward(d_out, xq,
//     x_scale_inv, w_t, w_scale_inv, state [, pending]) when it does; d_addend = d_out; d_bias =
//     bias_gradient(d_out). w, w_t and the scales are frozen.
//
//   linear_fp8_backward_input(d_out, w_t, w_scale_inv, state [, addend]){site, format}
//     -> d_x: d_out quantized (format, default E5M2) with state row `site`, then
//     (Σ_o decode(dq)·decode(w_t)) · (dq_scale_inv · w_scale_inv) (+ addend).
//
//   linear_fp8_backward_input_quantized(d_out, d_q, d_scale_inv, w_t, w_scale_inv [, addend]){format}
//     -> d_x as linear_fp8_backward_input, from codes d_out's producer wrote at the site
//     (swiglu_backward_fp8, ops/defs/fp8_output_def.cpp; models/fp8_fusion.h); d_out is not read.
//
//   linear_fp8_backward_quantized(d_out, d_q, d_scale_inv, xq, x_scale_inv, w_t, w_scale_inv [, addend])
//            {format} -> (d_x, d_weight) as linear_fp8_backward, from codes d_out's producer wrote
//     (swiglu_backward_fp8 of a trained gate / up projection); "..._accumulate" adds d_weight.
//     Both weight-gradient forms take {x_transposed: true} with xq given as [in, rows]
//     (transpose_fp8 of the codes, shared by projections that read the same input).
//
//   linear_fp8_backward(d_out, xq, x_scale_inv, w_t, w_scale_inv, state [, addend]){site, format}
//     -> (d_x as linear_fp8_backward_input, d_weight [out, in] in d_out's dtype):
//     d_weight = (Σ_rows decode(dq)ᵀ·decode(xq)) · (dq_scale_inv · x_scale_inv): the weight
//     gradient from the same E5M2 (or E4M3) gradient and the forward's E4M3 input, as the recipe's
//     reference computes it. "linear_fp8_backward_accumulate" adds d_weight into what its output
//     holds (autodiff's form writing a low-precision graph's persistent gradient directly).
//
// CPU: products of decoded values summed in fp32 by the reference matmul (ops/linear.h), scaled
// after, as cuBLASLt applies its scale pointers; the GPU sums in another order, so products agree
// to fp32 rounding, quantized tensors bit for bit.
#include <cstring>
#include <utility>
#include <vector>

#include "ops/defs/def_util.h"
#include "ops/defs/fp8_site_quantize.h"
#include "ops/fp8_tensor.h"
#include "ops/linear.h"
#include "quant/fp8.h"
#include "quant/fp8_scaling.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;
using quant::Fp8Format;



void expect_scale(const InferContext& ctx, size_t index) {
  ctx.expect_dtype(index, DType::F32);
  if (ctx.input(index).numel() != 1) ctx.fail("{} must hold one scale", ctx.input_label(index));
}

std::vector<float> decoded(const uint8_t* codes, int64_t count, Fp8Format format) {
  float table[256];
  for (int code = 0; code < 256; ++code) table[code] = quant::fp8_decode(static_cast<uint8_t>(code), format);
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) values[static_cast<size_t>(i)] = table[codes[i]];
  return values;
}

// out[rows, n] = (a[rows, k] · b[n, k]ᵀ) · factor (+ extra: bias [n] or addend [rows, n]), T out.
template <typename T>
void scaled_product(const std::vector<float>& a, const std::vector<float>& b, int64_t rows, int64_t k, int64_t n,
                    float factor, const T* bias, const T* addend, T* out) {
  std::vector<float> product(static_cast<size_t>(rows * n));
  linear_forward<float>(a.data(), b.data(), nullptr, rows, k, n, product.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      const size_t i = static_cast<size_t>(r * n + c);
      T value = static_cast<T>(product[i] * factor);
      if (bias != nullptr) value += bias[c];
      if (addend != nullptr) value += addend[i];
      out[i] = value;
    }
  }
}

// The products' sizes: d_out [rows, out], the weight [out, in].
struct ProductShape {
  int64_t rows = 0, in = 0, out = 0;
};

// d_x = gradient · decode(w_t)ᵀ · (d_scale_inv · w_scale_inv) (+ addend), gradient the decoded codes.
template <typename T>
void product_of_codes(const std::vector<float>& gradient, float d_scale_inv, const uint8_t* w_t, float w_scale_inv,
                      ProductShape shape, const T* addend, T* d_x) {
  const std::vector<float> weight_t = decoded(w_t, shape.in * shape.out, Fp8Format::E4M3);
  scaled_product<T>(gradient, weight_t, shape.rows, shape.out, shape.in, d_scale_inv * w_scale_inv, nullptr, addend, d_x);
}

// The input gradient of both backward ops: d_out quantized with its site's row (`format`), then
// d_x = decode(dq) · decode(w_t)ᵀ · (dq_scale_inv · w_scale_inv) (+ addend). Returns the decoded
// gradient and its scale_inv (the weight gradient's operand).
template <typename T>
std::pair<std::vector<float>, float> input_gradient(const T* d_out, const uint8_t* w_t, float w_scale_inv, float* row,
                                                    Fp8Format format, ProductShape shape, const T* addend, T* d_x) {
  const int64_t count = shape.rows * shape.out;
  std::vector<uint8_t> codes(static_cast<size_t>(count));
  const float d_scale_inv = quantize(d_out, count, format, row, codes.data());
  std::vector<float> gradient = decoded(codes.data(), count, format);
  product_of_codes<T>(gradient, d_scale_inv, w_t, w_scale_inv, shape, addend, d_x);
  return {std::move(gradient), d_scale_inv};
}

// d_weight [out, in] = decode(dq)ᵀ · decode(xq), summed in fp32, then both scales (added to what
// d_weight holds with `accumulate`). x_transposed: xq is [in, rows] (transpose_fp8's output).
template <typename T>
void weight_gradient(const std::vector<float>& gradient, float d_scale_inv, const uint8_t* xq, float x_scale_inv,
                     ProductShape shape, bool accumulate, T* d_weight, bool x_transposed = false) {
  std::vector<float> x = decoded(xq, shape.rows * shape.in, Fp8Format::E4M3);
  if (x_transposed) {
    std::vector<float> rows_first(x.size());
    for (int64_t r = 0; r < shape.rows; ++r) {
      for (int64_t c = 0; c < shape.in; ++c) rows_first[static_cast<size_t>(r * shape.in + c)] = x[static_cast<size_t>(c * shape.rows + r)];
    }
    x = std::move(rows_first);
  }
  std::vector<float> product(static_cast<size_t>(shape.out * shape.in), 0.0f);
  linear_backward<float>(gradient.data(), x.data(), nullptr, shape.rows, shape.in, shape.out, nullptr, product.data(),
                         nullptr);
  const float factor = d_scale_inv * x_scale_inv;
  for (size_t i = 0; i < product.size(); ++i) {
    const T value = static_cast<T>(product[i] * factor);
    d_weight[i] = accumulate ? static_cast<T>(d_weight[i] + value) : value;
  }
}

// ---- quantize_fp8 ----

std::vector<TensorType> infer_quantize(const InferContext& ctx) {
  if (ctx.input_count() != 1 && ctx.input_count() != 2) ctx.fail("quantize_fp8 takes x and an optional state");
  ctx.expect_floating(0);
  const Fp8Format format = format_named(ctx.attrs.string("format"), ctx.where());
  if (ctx.input_count() == 2) expect_fp8_state(ctx, 1, ctx.attrs.integer("site"));
  return {{dtype_of(format), ctx.input(0).shape}, {DType::F32, Shape{1}}};
}

CpuKernel bind_quantize(const CpuBindContext& ctx) {
  const Fp8Format format = format_named(ctx.attrs.string("format"), ctx.attrs.where());
  const bool has_state = ctx.inputs.size() == 2;
  const int64_t offset = has_state ? ctx.attrs.integer("site") * ctx.inputs[1].shape[1] : 0;
  const int64_t count = ctx.inputs[0].numel();
  return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
    using T = decltype(zero);
    return [=](const CpuKernelArgs& args) {
      float* row = has_state ? args.inputs[1].as<float>() + offset : nullptr;
      *args.outputs[1].as<float>() = quantize(args.inputs[0].as<T>(), count, format, row, args.outputs[0].as<uint8_t>());
    };
  });
}

// ---- quantize_fp8_weight ----

std::vector<TensorType> infer_quantize_weight(const InferContext& ctx) {
  if (ctx.input_count() != 1) ctx.fail("quantize_fp8_weight takes one weight");
  ctx.expect_floating(0);
  ctx.expect_rank(0, 2);
  const int64_t out = ctx.input(0).shape[0], in = ctx.input(0).shape[1];
  return {{DType::F8_E4M3, Shape{out, in}}, {DType::F8_E4M3, Shape{in, out}}, {DType::F32, Shape{1}}};
}

CpuKernel bind_quantize_weight(const CpuBindContext& ctx) {
  const int64_t out = ctx.inputs[0].shape[0], in = ctx.inputs[0].shape[1];
  return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
    using T = decltype(zero);
    return [=](const CpuKernelArgs& args) {
      const T* w = args.inputs[0].as<T>();
      std::vector<float> values(w, w + out * in);
      *args.outputs[2].as<float>() = quantize_fp8_tensor(values.data(), out, in, args.outputs[0].as<uint8_t>(),
                                                         args.outputs[1].as<uint8_t>());
    };
  });
}

// ---- linear_fp8 ----

struct LinearFp8Layout {
  bool bias = false, addend = false, state = false, trained_weight = false;
  size_t extra_index() const { return 6; }
  size_t state_index() const { return 6 + ((bias || addend) ? 1 : 0); }
  size_t weight_index() const { return state_index() + (state ? 1 : 0); }
  size_t count() const { return weight_index() + (trained_weight ? 1 : 0); }
};

LinearFp8Layout layout_of(const Attrs& attrs) {
  LinearFp8Layout layout;
  const std::string extra = attrs.string_or("extra", "");
  if (extra == "bias") layout.bias = true;
  else if (extra == "addend") layout.addend = true;
  else if (!extra.empty()) fail_user("{}: linear_fp8's extra must be \"bias\" or \"addend\", got \"{}\"", attrs.where(), extra);
  layout.state = attrs.has("grad_site");
  layout.trained_weight = attrs.boolean_or("trained_weight", false);
  return layout;
}

std::vector<TensorType> infer_linear(const InferContext& ctx) {
  const LinearFp8Layout layout = layout_of(ctx.attrs);
  if (ctx.input_count() != layout.count()) {
    ctx.fail("linear_fp8 with these attributes takes {} inputs, got {}", layout.count(), ctx.input_count());
  }
  ctx.expect_floating(0);
  ctx.expect_dtype(1, DType::F8_E4M3);
  if (ctx.input(1).shape != ctx.input(0).shape) ctx.fail("{} must have x's shape", ctx.input_label(1));
  expect_scale(ctx, 2);
  ctx.expect_dtype(3, DType::F8_E4M3);
  ctx.expect_dtype(4, DType::F8_E4M3);
  ctx.expect_rank(3, 2);
  ctx.expect_rank(4, 2);
  const int64_t out = ctx.input(3).shape[0], in = ctx.input(3).shape[1];
  if (ctx.input(4).shape != Shape{in, out}) ctx.fail("{} must be w's transpose [{}, {}]", ctx.input_label(4), in, out);
  ctx.expect_dim(0, -1, in);
  expect_scale(ctx, 5);
  Shape shape = ctx.input(0).shape;
  shape.back() = out;
  const TensorType result{ctx.input(0).dtype, shape};
  if (layout.bias && ctx.input(6) != TensorType{result.dtype, Shape{out}}) {
    ctx.fail("{} must be {}", ctx.input_label(6), format_type({result.dtype, Shape{out}}));
  }
  if (layout.addend && ctx.input(6) != result) ctx.fail("{} must be {}", ctx.input_label(6), format_type(result));
  if (layout.state) {
    expect_fp8_state(ctx, layout.state_index(), ctx.attrs.integer("grad_site"));
    format_named(ctx.attrs.string_or("grad_format", "e5m2"), ctx.where());
  }
  if (layout.trained_weight && ctx.input(layout.weight_index()) != TensorType{result.dtype, Shape{out, in}}) {
    ctx.fail("{} (the trained weight) must be {}", ctx.input_label(layout.weight_index()),
             format_type({result.dtype, Shape{out, in}}));
  }
  return {result};
}

InputGradients linear_gradient(GradientContext& ctx) {
  const LinearFp8Layout layout = layout_of(ctx.attrs());
  TensorId d_out = ctx.output_grad(0);
  InputGradients result(ctx.node().inputs.size());
  if (layout.addend) result[6] = if_needed(ctx, 6, d_out);
  if (layout.bias && ctx.needs_input_grad(6)) result[6] = ctx.op("bias_gradient", {d_out});
  const bool weight_gradient = layout.trained_weight && ctx.needs_input_grad(layout.weight_index());
  if (!ctx.needs_input_grad(0) && !weight_gradient) return result;
  if (!layout.state) {
    fail_user("{}: linear_fp8 without a scaling state (an evaluation graph) has no gradient", ctx.node().name);
  }
  nlohmann::json attrs{{"site", ctx.attrs().integer("grad_site")},
                       {"format", ctx.attrs().string_or("grad_format", "e5m2")}};
  if (!weight_gradient) {
    std::vector<TensorId> inputs{d_out, ctx.input(4), ctx.input(5), ctx.input(layout.state_index())};
    if (auto pending = ctx.take_pending_input_grad(0)) inputs.push_back(*pending);
    result[0] = ctx.op("linear_fp8_backward_input", inputs, attrs);
    return result;
  }
  // Both products from one quantization of d_out. d_x is computed even when x needs none (an
  // unread output): every projection of a decoder that trains its weights passes a gradient on.
  std::vector<TensorId> inputs{d_out, ctx.input(1), ctx.input(2), ctx.input(4), ctx.input(5), ctx.input(layout.state_index())};
  if (ctx.needs_input_grad(0)) {
    if (auto pending = ctx.take_pending_input_grad(0)) inputs.push_back(*pending);
  }
  graph::OpOutputs gradients = ctx.op("linear_fp8_backward", inputs, attrs);
  if (ctx.needs_input_grad(0)) result[0] = gradients[0];
  result[layout.weight_index()] = gradients[1];
  return result;
}

CpuKernel bind_linear(const CpuBindContext& ctx) {
  const LinearFp8Layout layout = layout_of(ctx.attrs);
  const int64_t out = ctx.inputs[3].shape[0], in = ctx.inputs[3].shape[1], rows = ctx.inputs[0].numel() / in;
  return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
    using T = decltype(zero);
    return [=](const CpuKernelArgs& args) {
      const std::vector<float> x = decoded(args.inputs[1].as<uint8_t>(), rows * in, Fp8Format::E4M3);
      const std::vector<float> w = decoded(args.inputs[3].as<uint8_t>(), out * in, Fp8Format::E4M3);
      const float factor = *args.inputs[2].as<float>() * *args.inputs[5].as<float>();
      scaled_product<T>(x, w, rows, in, out, factor, layout.bias ? args.inputs[6].as<T>() : nullptr,
                        layout.addend ? args.inputs[6].as<T>() : nullptr, args.outputs[0].as<T>());
    };
  });
}

// ---- linear_fp8_backward_input ----

std::vector<TensorType> infer_backward_input(const InferContext& ctx) {
  if (ctx.input_count() != 4 && ctx.input_count() != 5) {
    ctx.fail("linear_fp8_backward_input takes d_out, w_t, w_scale_inv, state and an optional addend");
  }
  ctx.expect_floating(0);
  ctx.expect_dtype(1, DType::F8_E4M3);
  ctx.expect_rank(1, 2);
  const int64_t in = ctx.input(1).shape[0], out = ctx.input(1).shape[1];
  ctx.expect_dim(0, -1, out);
  expect_scale(ctx, 2);
  expect_fp8_state(ctx, 3, ctx.attrs.integer("site"));
  format_named(ctx.attrs.string("format"), ctx.where());
  Shape shape = ctx.input(0).shape;
  shape.back() = in;
  const TensorType result{ctx.input(0).dtype, shape};
  if (ctx.input_count() == 5 && ctx.input(4) != result) ctx.fail("{} must be {}", ctx.input_label(4), format_type(result));
  return {result};
}

CpuKernel bind_backward_input(const CpuBindContext& ctx) {
  const int64_t in = ctx.inputs[1].shape[0], out = ctx.inputs[1].shape[1], rows = ctx.inputs[0].numel() / out;
  const Fp8Format format = format_named(ctx.attrs.string("format"), ctx.attrs.where());
  const int64_t offset = ctx.attrs.integer("site") * ctx.inputs[3].shape[1];
  const bool has_addend = ctx.inputs.size() == 5;
  return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
    using T = decltype(zero);
    return [=](const CpuKernelArgs& args) {
      input_gradient<T>(args.inputs[0].as<T>(), args.inputs[1].as<uint8_t>(), *args.inputs[2].as<float>(),
                        args.inputs[3].as<float>() + offset, format, {rows, in, out},
                        has_addend ? args.inputs[4].as<T>() : nullptr, args.outputs[0].as<T>());
    };
  });
}

// ---- linear_fp8_backward_input_quantized ----

// d_out (input 0, floating), its codes d_q (1) in the node's `format` and their scale_inv (2): the
// first inputs of the products that read the codes a producer wrote.
void expect_gradient_codes(const InferContext& ctx) {
  ctx.expect_floating(0);
  const Fp8Format format = format_named(ctx.attrs.string("format"), ctx.where());
  if (ctx.input(1) != TensorType{dtype_of(format), ctx.input(0).shape}) {
    ctx.fail("{} must be the codes of {}: {}", ctx.input_label(1), ctx.input_label(0),
             format_type({dtype_of(format), ctx.input(0).shape}));
  }
  expect_scale(ctx, 2);
}

// (d_out, d_q, d_scale_inv, w_t, w_scale_inv [, addend]){format}: d_out's codes were written by its
// producer (models/fp8_fusion.h); d_out is not read, it gives d_x its dtype.
std::vector<TensorType> infer_backward_input_quantized(const InferContext& ctx) {
  if (ctx.input_count() != 5 && ctx.input_count() != 6) {
    ctx.fail("linear_fp8_backward_input_quantized takes d_out, d_q, d_scale_inv, w_t, w_scale_inv and an optional addend");
  }
  expect_gradient_codes(ctx);
  ctx.expect_dtype(3, DType::F8_E4M3);
  ctx.expect_rank(3, 2);
  const int64_t in = ctx.input(3).shape[0], out = ctx.input(3).shape[1];
  ctx.expect_dim(0, -1, out);
  expect_scale(ctx, 4);
  Shape shape = ctx.input(0).shape;
  shape.back() = in;
  const TensorType result{ctx.input(0).dtype, shape};
  if (ctx.input_count() == 6 && ctx.input(5) != result) ctx.fail("{} must be {}", ctx.input_label(5), format_type(result));
  return {result};
}

CpuKernel bind_backward_input_quantized(const CpuBindContext& ctx) {
  const int64_t in = ctx.inputs[3].shape[0], out = ctx.inputs[3].shape[1], rows = ctx.inputs[0].numel() / out;
  const Fp8Format format = format_named(ctx.attrs.string("format"), ctx.attrs.where());
  const bool has_addend = ctx.inputs.size() == 6;
  return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
    using T = decltype(zero);
    return [=](const CpuKernelArgs& args) {
      const std::vector<float> gradient = decoded(args.inputs[1].as<uint8_t>(), rows * out, format);
      product_of_codes<T>(gradient, *args.inputs[2].as<float>(), args.inputs[3].as<uint8_t>(), *args.inputs[4].as<float>(),
                          {rows, in, out}, has_addend ? args.inputs[5].as<T>() : nullptr, args.outputs[0].as<T>());
    };
  });
}

// ---- linear_fp8_backward(_accumulate) ----

// d_x and d_weight of the products over xq (E4M3 [rows, in], its scale_inv after it) and w_t
// (E4M3 [in, out], its scale_inv after it), d_out (input 0) [rows, out]; the optional addend at
// `addend` must be d_x's type. Attr x_transposed (models/fp8_fusion.h: sibling projections share
// one transpose_fp8 of their input): xq is [in, rows].
std::vector<TensorType> infer_both_gradients(const InferContext& ctx, size_t xq, size_t w_t, size_t addend) {
  ctx.expect_dtype(xq, DType::F8_E4M3);
  expect_scale(ctx, xq + 1);
  ctx.expect_dtype(w_t, DType::F8_E4M3);
  ctx.expect_rank(w_t, 2);
  const int64_t in = ctx.input(w_t).shape[0], out = ctx.input(w_t).shape[1];
  ctx.expect_dim(0, -1, out);
  if (ctx.attrs.boolean_or("x_transposed", false)) {
    ctx.expect_rank(xq, 2);
    if (ctx.input(xq).shape[0] != in || ctx.input(xq).shape[1] != ctx.input(0).numel() / out) {
      ctx.fail("{} must be the transposed input codes [{}, {}]", ctx.input_label(xq), in, ctx.input(0).numel() / out);
    }
  } else {
    ctx.expect_dim(xq, -1, in);
  }
  if (ctx.input(0).numel() / out != ctx.input(xq).numel() / in) {
    ctx.fail("{} and {} must have the same number of rows", ctx.input_label(0), ctx.input_label(xq));
  }
  expect_scale(ctx, w_t + 1);
  Shape shape = ctx.input(0).shape;
  shape.back() = in;
  const TensorType d_x{ctx.input(0).dtype, shape};
  if (ctx.input_count() == addend + 1 && ctx.input(addend) != d_x) {
    ctx.fail("{} must be {}", ctx.input_label(addend), format_type(d_x));
  }
  return {d_x, {ctx.input(0).dtype, Shape{out, in}}};
}

std::vector<TensorType> infer_backward(const InferContext& ctx) {
  if (ctx.input_count() != 6 && ctx.input_count() != 7) {
    ctx.fail("linear_fp8_backward takes d_out, xq, x_scale_inv, w_t, w_scale_inv, state and an optional addend");
  }
  ctx.expect_floating(0);
  expect_fp8_state(ctx, 5, ctx.attrs.integer("site"));
  format_named(ctx.attrs.string("format"), ctx.where());
  return infer_both_gradients(ctx, 1, 3, 6);
}

CpuKernel bind_backward(const CpuBindContext& ctx, bool accumulate) {
  const int64_t in = ctx.inputs[3].shape[0], out = ctx.inputs[3].shape[1], rows = ctx.inputs[0].numel() / out;
  const Fp8Format format = format_named(ctx.attrs.string("format"), ctx.attrs.where());
  const int64_t offset = ctx.attrs.integer("site") * ctx.inputs[5].shape[1];
  const bool has_addend = ctx.inputs.size() == 7;
  const bool x_transposed = ctx.attrs.boolean_or("x_transposed", false);
  return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
    using T = decltype(zero);
    return [=](const CpuKernelArgs& args) {
      const auto [d_out, d_scale_inv] =
          input_gradient<T>(args.inputs[0].as<T>(), args.inputs[3].as<uint8_t>(), *args.inputs[4].as<float>(),
                            args.inputs[5].as<float>() + offset, format, {rows, in, out},
                            has_addend ? args.inputs[6].as<T>() : nullptr, args.outputs[0].as<T>());
      weight_gradient<T>(d_out, d_scale_inv, args.inputs[1].as<uint8_t>(), *args.inputs[2].as<float>(), {rows, in, out},
                         accumulate, args.outputs[1].as<T>(), x_transposed);
    };
  });
}

// ---- linear_fp8_backward_quantized(_accumulate) ----

// (d_out, d_q, d_scale_inv, xq, x_scale_inv, w_t, w_scale_inv [, addend]){format}: d_out is not read.
std::vector<TensorType> infer_backward_quantized(const InferContext& ctx) {
  if (ctx.input_count() != 7 && ctx.input_count() != 8) {
    ctx.fail("linear_fp8_backward_quantized takes d_out, d_q, d_scale_inv, xq, x_scale_inv, w_t, w_scale_inv and an "
             "optional addend");
  }
  expect_gradient_codes(ctx);
  return infer_both_gradients(ctx, 3, 5, 7);
}

CpuKernel bind_backward_quantized(const CpuBindContext& ctx, bool accumulate) {
  const int64_t in = ctx.inputs[5].shape[0], out = ctx.inputs[5].shape[1], rows = ctx.inputs[0].numel() / out;
  const Fp8Format format = format_named(ctx.attrs.string("format"), ctx.attrs.where());
  const bool has_addend = ctx.inputs.size() == 8;
  const bool x_transposed = ctx.attrs.boolean_or("x_transposed", false);
  return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
    using T = decltype(zero);
    return [=](const CpuKernelArgs& args) {
      const std::vector<float> gradient = decoded(args.inputs[1].as<uint8_t>(), rows * out, format);
      const float d_scale_inv = *args.inputs[2].as<float>();
      product_of_codes<T>(gradient, d_scale_inv, args.inputs[5].as<uint8_t>(), *args.inputs[6].as<float>(),
                          {rows, in, out}, has_addend ? args.inputs[7].as<T>() : nullptr, args.outputs[0].as<T>());
      weight_gradient<T>(gradient, d_scale_inv, args.inputs[3].as<uint8_t>(), *args.inputs[4].as<float>(),
                         {rows, in, out}, accumulate, args.outputs[1].as<T>(), x_transposed);
    };
  });
}

}  // namespace

void register_fp8_ops(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "quantize_fp8",
      .inputs = {"x", "state"},
      .outputs = {"q", "scale_inv"},
      .infer = infer_quantize,
      .gradient = {},
      .cpu = bind_quantize,
      .variadic_inputs = true,
      // y, d_x, d_w within 1e-2 (test_fp8_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "quantize_fp8_weight",
      .inputs = {"w"},
      .outputs = {"codes", "codes_t", "scale_inv"},
      .infer = infer_quantize_weight,
      .gradient = {},
      .cpu = bind_quantize_weight,
      // y, d_x, d_w within 1e-2 (test_fp8_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "linear_fp8",
      .inputs = {"x", "xq", "x_scale_inv", "w", "w_t", "w_scale_inv", "extra", "state", "weight"},
      .outputs = {"out"},
      .infer = infer_linear,
      .gradient = linear_gradient,
      .cpu = bind_linear,
      .variadic_inputs = true,
      .unread_inputs = {0},
      // y, d_x, d_w within 1e-2 (test_fp8_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "linear_fp8_backward_input",
      .inputs = {"d_out", "w_t", "w_scale_inv", "state", "addend"},
      .outputs = {"d_x"},
      .infer = infer_backward_input,
      .gradient = {},
      .cpu = bind_backward_input,
      .variadic_inputs = true,
      // y, d_x, d_w within 1e-2 (test_fp8_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "linear_fp8_backward_input_quantized",
      .inputs = {"d_out", "d_q", "d_scale_inv", "w_t", "w_scale_inv", "addend"},
      .outputs = {"d_x"},
      .infer = infer_backward_input_quantized,
      .gradient = {},
      .cpu = bind_backward_input_quantized,
      .variadic_inputs = true,
      .unread_inputs = {0},
      // y, d_x, d_w within 1e-2 (test_fp8_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 1e-2},
  });
  registry.add(OpDef{
      .name = "linear_fp8_backward",
      .inputs = {"d_out", "xq", "x_scale_inv", "w_t", "w_scale_inv", "state", "addend"},
      .outputs = {"d_x", "d_weight"},
      .infer = infer_backward,
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) { return bind_backward(ctx, false); },
      .variadic_inputs = true,
      // y, d_x, d_w within 1e-2 (test_fp8_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 1e-2},
  });
  for (const bool accumulate : {false, true}) {
    registry.add(OpDef{
        .name = accumulate ? "linear_fp8_backward_quantized_accumulate" : "linear_fp8_backward_quantized",
        .inputs = {"d_out", "d_q", "d_scale_inv", "xq", "x_scale_inv", "w_t", "w_scale_inv", "addend"},
        .outputs = {"d_x", "d_weight"},
        .infer = infer_backward_quantized,
        .gradient = {},
        .cpu = [accumulate](const CpuBindContext& ctx) { return bind_backward_quantized(ctx, accumulate); },
        .variadic_inputs = true,
        .accumulates_into_output = accumulate,
        .unread_inputs = {0},
        // y, d_x, d_w within 1e-2 (test_fp8_cuda.cpp)
        .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 1e-2},
    });
  }
  registry.add(OpDef{
      .name = "linear_fp8_backward_accumulate",
      .inputs = {"d_out", "xq", "x_scale_inv", "w_t", "w_scale_inv", "state", "addend"},
      .outputs = {"d_x", "d_weight"},
      .infer = infer_backward,
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) { return bind_backward(ctx, true); },
      .variadic_inputs = true,
      .accumulates_into_output = true,
      // y, d_x, d_w within 1e-2 (test_fp8_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 1e-2},
  });
}

}  // namespace surogate::ops::defs
