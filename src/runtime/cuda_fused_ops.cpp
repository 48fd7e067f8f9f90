// CUDA binders for fused_rmsnorm_rope, its backward and fused_qk_rmsnorm_rope (a decode step's q and k
// in one launch; ops/defs/rmsnorm_rope_def.cpp): Qwen3's
// per-head q/k RMSNorm and RoPE in one pass, on BF16 and F16 graphs (fp32 math inside, fp32 rstd;
// each binder a template on the 16-bit element type T); and
// fused_rope and its backward (ops/defs/rope_def.cpp, use_fused_rope): RoPE with cos/sin computed
// in fp32 from inv_freq and the position ids inside cuda/kernels/rope.h's kernel (head_dim a
// multiple of 8, rotary_dim of 16), else through fp32 tables in scratch and rope_apply.
//
// Where src/cuda/kernels/qk_norm_rope.h fits (full rotary: rotary_dim == head_dim, head_dim 16,
// 32, 64, 128 or 256) the binders call it: it normalises, scales and rotates in registers with
// cos/sin computed in fp32 from inv_freq and the position ids, so neither the normalised tensor
// nor a cos/sin table is written or read. Other shapes (the tiny test models' head_dim 8, partial
// rotary) run the unfused kernels through the plan's scratch: rmsnorm into a 16-bit temporary, fp32
// tables (rope_tables), rope_apply; backward the transposed rotation into a 16-bit temporary, then
// the rmsnorm backward. Both paths compute the CPU op's math; the fused one rounds once instead of
// twice and uses unrounded cos/sin, so it is closer to the fp32 reference than the unfused pair.
// d_weight is accumulated in fp32 in scratch and rounded once into the 16-bit output.
#include <memory>
#include <vector>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels/elementwise_16bit.h"
#include "cuda/kernels/qk_norm_rope.h"
#include "cuda/kernels/rmsnorm.h"
#include "cuda/kernels/rope.h"
#include "cuda/kernels/rope_tables.h"
#include "runtime/cuda_bind_checks.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

namespace k = cuda;

void expect_input(const CudaBindContext& ctx, size_t index, DType dtype) {
  require(ctx, ctx.inputs[index].dtype == dtype, "the CUDA backend runs this op with input {} as {}, got {}", index,
          dtype_safetensors_name(dtype), graph::format_type(ctx.inputs[index]));
}

struct NormRope {
  cuda::QkNormRopeShape shape;  // tokens, heads, head_dim, eps, attention scaling
  int half = 0;                 // rotary_dim / 2
  bool fused = false;           // the qk_norm_rope kernels fit the shape
  std::shared_ptr<cuda::DeviceBuffer<float>> inverse_frequency;

  int64_t rows() const { return shape.tokens * shape.heads; }
  int64_t count() const { return rows() * shape.head_dim; }
};

// x at x_index, weight after it, position_ids at `positions`; attrs as the op's shape rule checked them.
NormRope norm_rope_of(const CudaBindContext& ctx, size_t x_index, DType dtype, size_t positions) {
  expect_input(ctx, x_index, dtype);
  expect_input(ctx, x_index + 1, dtype);
  expect_input(ctx, positions, DType::I32);
  NormRope layout;
  const int64_t heads = ctx.attrs.integer("heads"), head_dim = ctx.attrs.integer("head_dim");
  layout.inverse_frequency = device_inverse_frequency(ctx);
  layout.half = static_cast<int>(layout.inverse_frequency->size());
  layout.shape = cuda::QkNormRopeShape{ctx.inputs[x_index].numel() / (heads * head_dim), static_cast<int>(heads),
                                       static_cast<int>(head_dim), static_cast<float>(ctx.attrs.number_or("eps", 0.0)),
                                       static_cast<float>(ctx.attrs.number_or("attention_scaling", 1.0))};
  layout.fused = cuda::qk_norm_rope_takes(head_dim) && 2 * layout.half == head_dim;
  require(ctx, layout.fused || (head_dim % 8 == 0 && head_dim <= 32768),
          "the CUDA q/k norm + RoPE needs a head_dim that is a multiple of 8, got {}", head_dim);
  return layout;
}

// (x, weight, position_ids) -> (out, rstd)
template <typename T>
CudaKernel bind_fused_rmsnorm_rope_typed(const CudaBindContext& ctx) {
  const NormRope layout = norm_rope_of(ctx, 0, element_dtype<T>(), 2);
  require(ctx, ctx.outputs[1].dtype == DType::F32, "rstd must be F32 in a 16-bit graph");
  if (layout.fused) {
    return [=](const CudaKernelArgs& args) {
      cuda::qk_norm_rope_forward(args.outputs[0].as<T>(), args.outputs[1].as<float>(), args.inputs[0].as<const T>(),
                                 args.inputs[1].as<const T>(), layout.inverse_frequency->data(),
                                 args.inputs[2].as<const int32_t>(), layout.shape, args.stream);
    };
  }
  ScratchLayout scratch;
  const size_t normed = scratch.take(sizeof(T) * layout.count());
  const size_t cos = scratch.take(sizeof(float) * layout.shape.tokens * layout.half);
  const size_t sin = scratch.take(sizeof(float) * layout.shape.tokens * layout.half);
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    const cuda::QkNormRopeShape& s = layout.shape;
    cuda::rmsnorm_forward(scratch_at<T>(resources, normed), args.outputs[1].as<float>(), args.inputs[0].as<const T>(),
                          args.inputs[1].as<const T>(), layout.rows(), s.head_dim, s.epsilon, args.stream);
    k::rope_tables(scratch_at<float>(resources, cos), scratch_at<float>(resources, sin), args.inputs[2].as<const int32_t>(),
                   layout.inverse_frequency->data(), s.tokens, layout.half, s.scaling, args.stream);
    k::rope_apply(args.outputs[0].as<T>(), scratch_at<const T>(resources, normed), scratch_at<const float>(resources, cos),
                  scratch_at<const float>(resources, sin), s.tokens, s.heads, s.head_dim, layout.half, 1.0f, args.stream);
  };
}
// (q, q_weight, k, k_weight, position_ids) -> (q_out, q_rstd, k_out, k_rstd): one pair launch. The
// decode rewrite makes the node only where the kernel takes the shape (generate/decode_fusion.h).
template <typename T>
CudaKernel bind_fused_qk_rmsnorm_rope_typed(const CudaBindContext& ctx) {
  const NormRope layout = norm_rope_of(ctx, 0, element_dtype<T>(), 4);
  expect_input(ctx, 2, element_dtype<T>());
  expect_input(ctx, 3, element_dtype<T>());
  require(ctx, layout.fused, "fused_qk_rmsnorm_rope takes head_dim 16, 32, 64, 128 or 256 with full rotary on CUDA");
  require(ctx, ctx.outputs[1].dtype == DType::F32 && ctx.outputs[3].dtype == DType::F32, "rstd must be F32 in a 16-bit graph");
  const int k_heads = static_cast<int>(ctx.attrs.integer("kv_heads"));
  return [=](const CudaKernelArgs& args) {
    const cuda::QkNormRopeTensor<T> q{args.outputs[0].as<T>(), args.outputs[1].as<float>(), args.inputs[0].as<const T>(),
                                      args.inputs[1].as<const T>()};
    const cuda::QkNormRopeTensor<T> k{args.outputs[2].as<T>(), args.outputs[3].as<float>(), args.inputs[2].as<const T>(),
                                      args.inputs[3].as<const T>()};
    cuda::qk_norm_rope_forward_pair(q, k, layout.inverse_frequency->data(), args.inputs[4].as<const int32_t>(),
                                    layout.shape, k_heads, args.stream);
  };
}

CudaKernel bind_fused_rmsnorm_rope(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_fused_rmsnorm_rope_typed<T>(ctx); });
}

// (d_out, x, weight, rstd, position_ids) -> (d_x[, d_weight]): no d_weight output (weight_grad
// false, a frozen weight) skips the weight's reduction. kFp8 (fused_rmsnorm_rope_backward_fp8,
// ops/defs/fp8_output_def.cpp; bf16): the scaling state is a last input {site, format}, and d_x's
// codes and scale_inv last outputs, written by the fused kernel's FP8 epilogue (a shape it does
// not take: the unfused backward, then the site's quantization, as quantize_fp8 runs it).
template <typename T, bool kFp8 = false>
CudaKernel bind_fused_rmsnorm_rope_backward_typed(const CudaBindContext& ctx) {
  const NormRope layout = norm_rope_of(ctx, 1, element_dtype<T>(), 4);
  expect_input(ctx, 0, element_dtype<T>());
  expect_input(ctx, 3, DType::F32);
  const bool weight_grad = ctx.outputs.size() == (kFp8 ? 4u : 2u);
  const int64_t site_offset = kFp8 ? ctx.attrs.integer("site") * ctx.inputs[5].shape[1] : 0;
  const int64_t site_index = kFp8 ? ctx.attrs.integer("site") : -1;
  const cuda::Fp8Target format =
      kFp8 && ctx.attrs.string_or("format", "e5m2") == "e4m3" ? cuda::Fp8Target::E4M3 : cuda::Fp8Target::E5M2;
  const size_t q_output = ctx.outputs.size() - 2;
  require(ctx, !weight_grad || ctx.outputs[1].dtype == element_dtype<T>(), "d_weight must have x's dtype ({})",
          dtype_safetensors_name(element_dtype<T>()));
  const int64_t channels = layout.shape.head_dim;
  ScratchLayout scratch;
  const size_t dweight = weight_grad ? scratch.take(sizeof(float) * channels) : 0;
  const int64_t partial_floats = layout.fused ? cuda::qk_norm_rope_backward_scratch_floats(layout.shape)
                                              : cuda::rmsnorm_backward_scratch_floats(layout.rows(), channels);
  const size_t partials = weight_grad ? scratch.take(sizeof(float) * partial_floats) : 0;
  const size_t dnormed = layout.fused ? 0 : scratch.take(sizeof(T) * layout.count());
  const size_t cos = layout.fused ? 0 : scratch.take(sizeof(float) * layout.shape.tokens * layout.half);
  const size_t sin = layout.fused ? 0 : scratch.take(sizeof(float) * layout.shape.tokens * layout.half);
  const size_t amax = kFp8 ? scratch.take(sizeof(float)) : 0;
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  const bool d_x_read = ctx.output_read(0);
  return [=](const CudaKernelArgs& args) {
    const cuda::QkNormRopeShape& s = layout.shape;
    cuda::Fp8Output site;
    if constexpr (kFp8) {
      // The fused kernel's epilogue skips its pending pass when the host knows the delayed amax;
      // the unfused path below quantizes as quantize_fp8 does and keeps its amax pass.
      site = {args.inputs[5].as<float>() + site_offset, scratch_at<float>(resources, amax),
              args.outputs[q_output].as<uint8_t>(), args.outputs[q_output + 1].as<float>(), format,
              layout.fused && resources->fp8_delayed(site_index)};
      if (!site.delayed_known) CUDA_CHECK(cudaMemsetAsync(site.amax, 0, sizeof(float), args.stream));
    }
    float* accumulator = weight_grad ? scratch_at<float>(resources, dweight) : nullptr;
    float* partial_rows = weight_grad ? scratch_at<float>(resources, partials) : nullptr;
    if (weight_grad) CUDA_CHECK(cudaMemsetAsync(accumulator, 0, sizeof(float) * channels, args.stream));
    const T* d_out = args.inputs[0].as<const T>();
    const T* x = args.inputs[1].as<const T>();
    const T* weight = args.inputs[2].as<const T>();
    const float* rstd = args.inputs[3].as<const float>();
    const int32_t* positions = args.inputs[4].as<const int32_t>();
    if (layout.fused && kFp8) {
      // An unread bf16 d_x (full fine-tuning: the projection reads the codes) is not written once
      // the host knows the delayed amax.
      cuda::qk_norm_rope_backward_fp8(site.needs_bf16(d_x_read) ? args.outputs[0].as<__nv_bfloat16>() : nullptr,
                                      accumulator, partial_rows,
                                      args.inputs[0].as<const __nv_bfloat16>(), args.inputs[1].as<const __nv_bfloat16>(),
                                      args.inputs[2].as<const __nv_bfloat16>(), rstd, layout.inverse_frequency->data(),
                                      positions, s, site, args.stream);
    } else if (layout.fused) {
      cuda::qk_norm_rope_backward(args.outputs[0].as<T>(), accumulator, partial_rows, d_out, x, weight, rstd,
                                  layout.inverse_frequency->data(), positions, s, args.stream);
    } else {
      k::rope_tables(scratch_at<float>(resources, cos), scratch_at<float>(resources, sin), positions, layout.inverse_frequency->data(),
                     s.tokens, layout.half, s.scaling, args.stream);
      k::rope_apply(scratch_at<T>(resources, dnormed), d_out, scratch_at<const float>(resources, cos), scratch_at<const float>(resources, sin),
                    s.tokens, s.heads, s.head_dim, layout.half, -1.0f, args.stream);
      cuda::rmsnorm_backward(args.outputs[0].as<T>(), accumulator, partial_rows,
                             scratch_at<const T>(resources, dnormed), nullptr, x, weight, rstd, layout.rows(), channels,
                             args.stream);
      if constexpr (kFp8) {
        const __nv_bfloat16* d_x = args.outputs[0].as<const __nv_bfloat16>();
        cuda::fp8_record_amax(d_x, layout.count(), site.row, site.amax, args.stream);
        cuda::fp8_quantize(d_x, layout.count(), format, site.row, site.amax, site.q, site.scale_inv, args.stream);
      }
    }
    if (weight_grad) k::convert_from_f32<T>(accumulator, args.outputs[1].as<T>(), channels, args.stream);
  };
}
CudaKernel bind_fused_rmsnorm_rope_backward(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() {
    return bind_fused_rmsnorm_rope_backward_typed<T>(ctx);
  });
}
CudaKernel bind_fused_rmsnorm_rope_backward_fp8(const CudaBindContext& ctx) {
  require(ctx, ctx.inputs[0].dtype == DType::BF16, "the FP8 q/k norm + RoPE backward runs in bf16 graphs");
  return bind_fused_rmsnorm_rope_backward_typed<__nv_bfloat16, true>(ctx);
}

// (x, position_ids) -> out, rotated by +angle (sign 1) or −angle (the backward, sign −1).
template <typename T>
CudaKernel bind_fused_rope_typed(const CudaBindContext& ctx, float sign) {
  expect_input(ctx, 0, element_dtype<T>());
  expect_input(ctx, 1, DType::I32);
  auto inverse_frequency = device_inverse_frequency(ctx);
  const int heads = static_cast<int>(ctx.attrs.integer("heads")), head_dim = static_cast<int>(ctx.attrs.integer("head_dim"));
  const int half = static_cast<int>(inverse_frequency->size());
  const int64_t tokens = ctx.inputs[0].numel() / (int64_t{heads} * head_dim);
  const float scaling = static_cast<float>(ctx.attrs.number_or("attention_scaling", 1.0));
  require(ctx, head_dim % 8 == 0, "the CUDA RoPE needs a head_dim that is a multiple of 8, got {}", head_dim);
  if ((2 * half) % 16 == 0) {
    return [=](const CudaKernelArgs& args) {
      const auto launch = sign > 0.0f ? &cuda::rope_forward<T> : &cuda::rope_backward<T>;
      launch(args.outputs[0].as<T>(), args.inputs[0].as<const T>(), inverse_frequency->data(),
             args.inputs[1].as<const int32_t>(), tokens, heads, head_dim, 2 * half, scaling, args.stream);
    };
  }
  ScratchLayout scratch;
  const size_t cos = scratch.take(sizeof(float) * tokens * half);
  const size_t sin = scratch.take(sizeof(float) * tokens * half);
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    k::rope_tables(scratch_at<float>(resources, cos), scratch_at<float>(resources, sin), args.inputs[1].as<const int32_t>(),
                   inverse_frequency->data(), tokens, half, scaling, args.stream);
    k::rope_apply(args.outputs[0].as<T>(), args.inputs[0].as<const T>(), scratch_at<const float>(resources, cos),
                  scratch_at<const float>(resources, sin), tokens, heads, head_dim, half, sign, args.stream);
  };
}
CudaKernel bind_fused_rope(const CudaBindContext& ctx, float sign) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_fused_rope_typed<T>(ctx, sign); });
}

}  // namespace

void register_fused_cuda_ops(CudaOpTable& table) {
  table.add("fused_rmsnorm_rope", bind_fused_rmsnorm_rope);
  table.add("fused_qk_rmsnorm_rope", [](const CudaBindContext& ctx) {
    return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_fused_qk_rmsnorm_rope_typed<T>(ctx); });
  });
  table.add("fused_rmsnorm_rope_backward", bind_fused_rmsnorm_rope_backward);
  table.add("fused_rmsnorm_rope_backward_fp8", bind_fused_rmsnorm_rope_backward_fp8);
  table.add("fused_rope", [](const CudaBindContext& ctx) { return bind_fused_rope(ctx, 1.0f); });
  table.add("fused_rope_backward", [](const CudaBindContext& ctx) { return bind_fused_rope(ctx, -1.0f); });
}

}  // namespace surogate::runtime
