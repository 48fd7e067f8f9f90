// CUDA binders for the decoder's model ops (ops/defs, docs/ops.md) and their backward ops, on
// BF16 graphs (the bf16 recipe: bf16 weights and activations, fp32 accumulation inside every
// kernel, fp32 rstd / logsumexp / loss) and F16 graphs (torch_dtype: float16, the same with fp16):
// each binder is a template on the 16-bit element type T, dispatched on the node's dtype. Each
// binder checks dtypes and kernel constraints at load
// time (UserError naming the node), reserves its temporaries in the plan's shared scratch
// (CudaResources) and returns a closure that only launches work on the stream.
//
// Where the graph contract and the src/cuda kernels differ, the binder bridges:
//  * parameter gradients (d_weight, d_table) are BF16 (F16) tensors in a BF16 (F16) graph; the kernels that
//    accumulate them in fp32 (embedding, rmsnorm, LM head) do so in scratch, then round once;
//    linear weight gradients come out of cuBLASLt in bf16 directly (runtime/cuda_linear_ops.cpp).
//  * attention takes document ids [B, T]; the kernels take cu_seqlens over the B·T flattened
//    tokens, built per call on the device (cuda/kernels/plain_attention.h). Its logsumexp output is laid
//    out [Hq, B·T] (the kernels' layout, read only by the CUDA attention_backward), not the CPU's
//    [B, Hq, T]. Head dims 32/64/128 use the flash kernels, other dims up to 256 a plain kernel.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels/attention.h"
#include "cuda/kernels/elementwise_16bit.h"
#include "cuda/kernels/embedding.h"
#include "cuda/kernels/plain_attention.h"
#include "cuda/kernels/qk_norm_rope.h"
#include "cuda/kernels/rmsnorm.h"
#include "cuda/kernels/rope_tables.h"
#include "cuda/kernels/swiglu.h"
#include "runtime/cuda_bind_checks.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

namespace k = cuda;

// ---- embedding ----

template <typename T>
CudaKernel bind_embedding_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::I32);
  expect_in(ctx, 1, element_dtype<T>());
  const int64_t vocab = ctx.inputs[1].shape[0], channels = ctx.inputs[1].shape[1], tokens = ctx.inputs[0].numel();
  require(ctx, channels % 8 == 0, "the CUDA embedding needs a width that is a multiple of 8, got {}", channels);
  return [=](const CudaKernelArgs& args) {
    cuda::embedding_forward(args.outputs[0].as<T>(), args.inputs[0].as<const int32_t>(),
                            args.inputs[1].as<const T>(), tokens, vocab, channels, args.stream);
  };
}
CudaKernel bind_embedding(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[1].dtype, [&]<typename T>() { return bind_embedding_typed<T>(ctx); });
}

template <typename T>
CudaKernel bind_embedding_backward_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::I32);
  expect_in(ctx, 1, element_dtype<T>());
  expect_out(ctx, 0, element_dtype<T>());
  const int64_t vocab = ctx.inputs[2].shape[0], channels = ctx.inputs[2].shape[1], tokens = ctx.inputs[0].numel();
  require(ctx, channels % 8 == 0, "the CUDA embedding needs a width that is a multiple of 8, got {}", channels);
  ScratchLayout layout;
  const size_t table = layout.take(sizeof(float) * vocab * channels);
  ctx.resources.reserve_scratch(layout.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    cuda::embedding_backward_rows(args.outputs[0].as<T>(), scratch_at<float>(resources, table),
                                  args.inputs[0].as<const int32_t>(), args.inputs[1].as<const T>(), tokens, vocab,
                                  channels, args.stream);
  };
}
CudaKernel bind_embedding_backward(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[1].dtype, [&]<typename T>() { return bind_embedding_backward_typed<T>(ctx); });
}

// ---- rmsnorm ----

void check_norm_width(const CudaBindContext& ctx, int64_t channels) {
  require(ctx, channels % 8 == 0 && channels <= 32768,
          "the CUDA rmsnorm needs a normalised width that is a multiple of 8 and at most 32768, got {}", channels);
}

// Narrow rows (a per-head norm: [tokens · heads, head_dim]) are a poor fit for the
// block-per-row rmsnorm kernels (most threads idle on 128 channels); the fused qk-norm + RoPE
// kernels handle head_dim/16 lanes per row, and with every inverse frequency zero their rotation
// is the identity (cos 0 = 1, sin 0 = 0 exactly), so they compute plain rmsnorm. Only per-head
// rows take that path (x wider than the weight): a hidden-size norm always runs the block kernel,
// the one fused_residual_rmsnorm runs, so the rmsnorm the recompute planner re-emits for a fused
// norm's output (compiler/recompute.h) reproduces it bit for bit, also on tiny models.
struct NarrowNorm {
  bool used = false;
  cuda::QkNormRopeShape shape;
  std::shared_ptr<cuda::DeviceBuffer<float>> zero_frequencies;
  std::shared_ptr<cuda::DeviceBuffer<int32_t>> zero_positions;
};

NarrowNorm narrow_norm(int64_t rows, int64_t channels, int64_t x_width, float eps) {
  NarrowNorm narrow;
  narrow.used = x_width > channels && channels % 16 == 0 && channels <= 256;
  if (!narrow.used) return narrow;
  narrow.shape = cuda::QkNormRopeShape{rows, 1, static_cast<int>(channels), eps, 1.0f};
  narrow.zero_frequencies = std::make_shared<cuda::DeviceBuffer<float>>(cuda::to_device(std::vector<float>(channels / 2, 0.0f)));
  narrow.zero_positions = std::make_shared<cuda::DeviceBuffer<int32_t>>(cuda::to_device(std::vector<int32_t>(rows, 0)));
  return narrow;
}

template <typename T>
CudaKernel bind_rmsnorm_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  expect_out(ctx, 1, DType::F32);
  const int64_t channels = ctx.inputs[1].shape[0], rows = ctx.inputs[0].numel() / channels;
  check_norm_width(ctx, channels);
  const float eps = static_cast<float>(ctx.attrs.number("eps"));
  const NarrowNorm narrow = narrow_norm(rows, channels, last(ctx.inputs[0]), eps);
  return [=](const CudaKernelArgs& args) {
    if (narrow.used) {
      cuda::qk_norm_rope_forward(args.outputs[0].as<T>(), args.outputs[1].as<float>(), args.inputs[0].as<const T>(),
                                 args.inputs[1].as<const T>(), narrow.zero_frequencies->data(),
                                 narrow.zero_positions->data(), narrow.shape, args.stream);
      return;
    }
    cuda::rmsnorm_forward(args.outputs[0].as<T>(), args.outputs[1].as<float>(), args.inputs[0].as<const T>(),
                          args.inputs[1].as<const T>(), rows, channels, eps, args.stream);
  };
}
CudaKernel bind_rmsnorm(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_rmsnorm_typed<T>(ctx); });
}

template <typename T>
CudaKernel bind_fused_residual_rmsnorm_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  expect_out(ctx, 2, DType::F32);
  const int64_t channels = ctx.inputs[2].shape[0], rows = ctx.inputs[0].numel() / channels;
  check_norm_width(ctx, channels);
  const float eps = static_cast<float>(ctx.attrs.number("eps"));
  return [=](const CudaKernelArgs& args) {
    cuda::residual_rmsnorm_forward(args.outputs[0].as<T>(), args.outputs[1].as<T>(), args.outputs[2].as<float>(),
                                   args.inputs[0].as<const T>(), args.inputs[1].as<const T>(),
                                   args.inputs[2].as<const T>(), rows, channels, eps, args.stream);
  };
}
CudaKernel bind_fused_residual_rmsnorm(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_fused_residual_rmsnorm_typed<T>(ctx); });
}

// rmsnorm_backward (d_out, x, weight, rstd) and fused_residual_rmsnorm_backward (d_out,
// residual_out, weight, rstd [, d_residual_out]) are the same kernel. Without a d_weight output
// (weight_grad false: a frozen weight) the kernels skip the weight's reduction.
template <typename T>
CudaKernel bind_rmsnorm_backward_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  expect_in(ctx, 3, DType::F32);
  const bool weight_grad = ctx.outputs.size() == 2;
  if (weight_grad) expect_out(ctx, 1, element_dtype<T>());
  const int64_t channels = ctx.inputs[2].shape[0], rows = ctx.inputs[1].numel() / channels;
  check_norm_width(ctx, channels);
  const bool has_residual = ctx.inputs.size() == 5;
  // The forward op's eps is not needed: the backward reads the saved rstd.
  const NarrowNorm narrow = has_residual ? NarrowNorm{} : narrow_norm(rows, channels, last(ctx.inputs[1]), 0.0f);
  const int64_t partial_floats = narrow.used ? cuda::qk_norm_rope_backward_scratch_floats(narrow.shape)
                                             : cuda::rmsnorm_backward_scratch_floats(rows, channels);
  ScratchLayout layout;
  const size_t partials = weight_grad ? layout.take(sizeof(float) * partial_floats) : 0;
  const size_t dweight = weight_grad ? layout.take(sizeof(float) * channels) : 0;
  ctx.resources.reserve_scratch(layout.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    float* accumulator = weight_grad ? scratch_at<float>(resources, dweight) : nullptr;
    float* scratch = weight_grad ? scratch_at<float>(resources, partials) : nullptr;
    if (weight_grad) zero_async(accumulator, sizeof(float) * channels, args.stream);
    if (narrow.used) {
      cuda::qk_norm_rope_backward(args.outputs[0].as<T>(), accumulator, scratch, args.inputs[0].as<const T>(),
                                  args.inputs[1].as<const T>(), args.inputs[2].as<const T>(),
                                  args.inputs[3].as<const float>(), narrow.zero_frequencies->data(),
                                  narrow.zero_positions->data(), narrow.shape, args.stream);
    } else {
      cuda::rmsnorm_backward(args.outputs[0].as<T>(), accumulator, scratch, args.inputs[0].as<const T>(),
                             has_residual ? args.inputs[4].as<const T>() : nullptr, args.inputs[1].as<const T>(),
                             args.inputs[2].as<const T>(), args.inputs[3].as<const float>(), rows, channels,
                             args.stream);
    }
    if (weight_grad) k::convert_from_f32<T>(accumulator, args.outputs[1].as<T>(), channels, args.stream);
  };
}
CudaKernel bind_rmsnorm_backward(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_rmsnorm_backward_typed<T>(ctx); });
}

// ---- swiglu ----

void check_swiglu_width(const CudaBindContext& ctx, int64_t channels) {
  require(ctx, channels % 8 == 0, "the CUDA swiglu needs an intermediate size that is a multiple of 8, got {}", channels);
}

template <typename T>
CudaKernel bind_swiglu_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  const int64_t channels = last(ctx.inputs[0]), rows = ctx.inputs[0].numel() / channels;
  check_swiglu_width(ctx, channels);
  return [=](const CudaKernelArgs& args) {
    cuda::swiglu_forward(args.outputs[0].as<T>(), args.inputs[0].as<const T>(), args.inputs[1].as<const T>(),
                         rows, channels, channels, args.stream);
  };
}
CudaKernel bind_swiglu(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_swiglu_typed<T>(ctx); });
}

template <typename T>
CudaKernel bind_swiglu_backward_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  const int64_t channels = last(ctx.inputs[0]), rows = ctx.inputs[0].numel() / channels;
  check_swiglu_width(ctx, channels);
  return [=](const CudaKernelArgs& args) {
    cuda::swiglu_backward(args.outputs[0].as<T>(), args.outputs[1].as<T>(), args.inputs[0].as<const T>(),
                          args.inputs[1].as<const T>(), args.inputs[2].as<const T>(), rows, channels, channels,
                          args.stream);
  };
}
CudaKernel bind_swiglu_backward(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_swiglu_backward_typed<T>(ctx); });
}

template <typename T>
CudaKernel bind_swiglu_fused_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  const int64_t channels = last(ctx.inputs[0]) / 2, rows = ctx.inputs[0].numel() / (2 * channels);
  check_swiglu_width(ctx, channels);
  return [=](const CudaKernelArgs& args) {
    const T* gate_up = args.inputs[0].as<const T>();
    cuda::swiglu_forward(args.outputs[0].as<T>(), gate_up, gate_up + channels, rows, channels, 2 * channels,
                         args.stream);
  };
}
CudaKernel bind_swiglu_fused(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_swiglu_fused_typed<T>(ctx); });
}

template <typename T>
CudaKernel bind_swiglu_fused_backward_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  const int64_t channels = last(ctx.inputs[0]), rows = ctx.inputs[0].numel() / channels;
  check_swiglu_width(ctx, channels);
  return [=](const CudaKernelArgs& args) {
    const T* gate_up = args.inputs[1].as<const T>();
    T* d_gate_up = args.outputs[0].as<T>();
    cuda::swiglu_backward(d_gate_up, d_gate_up + channels, args.inputs[0].as<const T>(), gate_up, gate_up + channels,
                          rows, channels, 2 * channels, args.stream);
  };
}
CudaKernel bind_swiglu_fused_backward(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_swiglu_fused_backward_typed<T>(ctx); });
}

// ---- rope ----

CudaKernel bind_rope_cos_sin(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::I32);
  require(ctx, ctx.attrs.has("inv_freq"),
          "the CUDA backend takes rope_cos_sin with an 'inv_freq' attribute (as models::build_decoder_graph writes "
          "it); tables from RoPE-config attributes are computed on the CPU backend only");
  std::vector<float> inverse;
  for (const auto& value : ctx.attrs.raw().at("inv_freq")) inverse.push_back(static_cast<float>(value.get<double>()));
  const float scaling = static_cast<float>(ctx.attrs.number_or("attention_scaling", 1.0));
  const int half = static_cast<int>(inverse.size());
  const int64_t tokens = ctx.inputs[0].numel();
  const DType dtype = ctx.outputs[0].dtype;
  require(ctx, dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16,
          "the CUDA backend writes F32, BF16 or F16 RoPE tables, not {}", dtype_safetensors_name(dtype));
  auto device_inverse = std::make_shared<cuda::DeviceBuffer<float>>(cuda::to_device(inverse));
  auto tables = [=]<typename Table>(const CudaKernelArgs& args) {
    k::rope_tables(args.outputs[0].as<Table>(), args.outputs[1].as<Table>(), args.inputs[0].as<const int32_t>(),
                   device_inverse->data(), tokens, half, scaling, args.stream);
  };
  if (dtype == DType::F32) return [=](const CudaKernelArgs& args) { tables.template operator()<float>(args); };
  return by_element_type(dtype, [&]<typename T>() -> CudaKernel {
    return [=](const CudaKernelArgs& args) { tables.template operator()<T>(args); };
  });
}

// rope (x, cos, sin) and rope_backward (d_out, cos, sin): rotation by +angle or −angle.
template <typename T>
CudaKernel bind_rope_with_sign_typed(const CudaBindContext& ctx, float sign) {
  expect_in(ctx, 0, element_dtype<T>());
  const DType table = ctx.inputs[1].dtype;
  require(ctx, table == DType::F32 || table == element_dtype<T>(),
          "the CUDA backend reads F32 RoPE tables or tables in x's dtype ({}), not {}",
          dtype_safetensors_name(element_dtype<T>()), dtype_safetensors_name(table));
  const graph::Shape& x = ctx.inputs[0].shape;
  int64_t heads = 0, head_dim = 0;
  if (x.size() == 4 && !ctx.attrs.has("heads")) {
    heads = x[2];
    head_dim = x[3];
  } else {
    heads = ctx.attrs.integer("heads");
    head_dim = ctx.attrs.integer("head_dim");
  }
  const int64_t tokens = ctx.inputs[0].numel() / (heads * head_dim);
  const int half = static_cast<int>(last(ctx.inputs[1]));
  return [=](const CudaKernelArgs& args) {
    if (table != DType::F32) {
      k::rope_apply(args.outputs[0].as<T>(), args.inputs[0].as<const T>(), args.inputs[1].as<const T>(),
                    args.inputs[2].as<const T>(), tokens, static_cast<int>(heads), static_cast<int>(head_dim), half,
                    sign, args.stream);
    } else {
      k::rope_apply(args.outputs[0].as<T>(), args.inputs[0].as<const T>(), args.inputs[1].as<const float>(),
                    args.inputs[2].as<const float>(), tokens, static_cast<int>(heads), static_cast<int>(head_dim), half,
                    sign, args.stream);
    }
  };
}

CudaKernel bind_rope_with_sign(const CudaBindContext& ctx, float sign) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_rope_with_sign_typed<T>(ctx, sign); });
}

CudaKernel bind_rope(const CudaBindContext& ctx) { return bind_rope_with_sign(ctx, 1.0f); }
CudaKernel bind_rope_backward(const CudaBindContext& ctx) { return bind_rope_with_sign(ctx, -1.0f); }

// ---- attention ----

struct AttentionLayout {
  int64_t batch = 0, sequence = 0;
  int q_heads = 0, kv_heads = 0, head_dim = 0, window = 0;
  float scale = 0.0f;
  bool flash = false;
  int64_t tokens() const { return batch * sequence; }
};

AttentionLayout attention_layout(const CudaBindContext& ctx) {
  AttentionLayout layout;
  const graph::Shape& q = ctx.inputs[0].shape;
  const graph::Shape& k = ctx.inputs[1].shape;
  if (q.size() == 4) {
    layout.q_heads = static_cast<int>(q[2]);
    layout.kv_heads = static_cast<int>(k[2]);
    layout.head_dim = static_cast<int>(q[3]);
  } else {
    layout.q_heads = static_cast<int>(ctx.attrs.integer("query_heads"));
    layout.kv_heads = static_cast<int>(ctx.attrs.integer("kv_heads"));
    layout.head_dim = static_cast<int>(ctx.attrs.integer("head_dim"));
  }
  layout.batch = q[0];
  layout.sequence = q[1];
  layout.window = static_cast<int>(ctx.attrs.integer_or("window", 0));
  const double scale = ctx.attrs.number_or("scale", 0.0);
  layout.scale = static_cast<float>(scale > 0.0 ? scale : 1.0 / std::sqrt(static_cast<double>(layout.head_dim)));
  layout.flash = layout.head_dim == 32 || layout.head_dim == 64 || layout.head_dim == 128;
  require(ctx, layout.flash || layout.head_dim <= 256, "the CUDA attention supports head_dim up to 256, got {}",
          layout.head_dim);
  require(ctx, layout.tokens() < (int64_t{1} << 31), "the CUDA attention takes fewer than 2^31 tokens per call");
  return layout;
}

cuda::AttentionShape flash_shape(const AttentionLayout& layout) {
  // `documents` is an upper bound: cu_seqlens_from_documents pads past the last document.
  return cuda::AttentionShape{layout.tokens(), layout.q_heads, layout.kv_heads, layout.head_dim,
                              static_cast<int>(layout.tokens()), layout.window, layout.scale,
                              static_cast<int>(layout.sequence)};
}

k::PlainAttentionShape plain_shape(const AttentionLayout& layout) {
  return k::PlainAttentionShape{layout.tokens(), layout.q_heads, layout.kv_heads, layout.head_dim, layout.window,
                                layout.scale};
}

template <typename T>
CudaKernel bind_attention_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  expect_out(ctx, 1, DType::F32);
  const AttentionLayout layout = attention_layout(ctx);
  const bool has_documents = ctx.inputs.size() == 4;
  ScratchLayout scratch;
  const size_t cu = scratch.take(sizeof(int32_t) * (layout.tokens() + 1));
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    int32_t* cu_seqlens = scratch_at<int32_t>(resources, cu);
    k::cu_seqlens_from_documents(cu_seqlens, has_documents ? args.inputs[3].as<const int32_t>() : nullptr,
                                 layout.batch, layout.sequence, args.stream);
    const T *q = args.inputs[0].as<const T>(), *kk = args.inputs[1].as<const T>(),
               *v = args.inputs[2].as<const T>();
    if (layout.flash) {
      cuda::attention_forward(args.outputs[0].as<T>(), args.outputs[1].as<float>(), q, kk, v, cu_seqlens,
                              flash_shape(layout), args.stream);
    } else {
      k::plain_attention_forward(args.outputs[0].as<T>(), args.outputs[1].as<float>(), q, kk, v, cu_seqlens,
                                 plain_shape(layout), args.stream);
    }
  };
}
CudaKernel bind_attention(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_attention_typed<T>(ctx); });
}

// attention_fp8 (q, k, v [, document_ids], state){site, format e4m3} -> (out, logsumexp, q, scale_inv):
// the flash forward with the FP8 epilogue (cuda/kernels/attention.h); other head sizes run the plain
// forward, then the site's quantization as quantize_fp8 runs it.
CudaKernel bind_attention_fp8(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  expect_out(ctx, 1, DType::F32);
  const size_t state = ctx.inputs.size() - 1;
  const AttentionLayout layout = attention_layout(ctx);
  const bool has_documents = state == 4;
  const int64_t offset = ctx.attrs.integer("site") * ctx.inputs[state].shape[1];
  const int64_t site_index = ctx.attrs.integer("site");
  ScratchLayout scratch;
  const size_t cu = scratch.take(sizeof(int32_t) * (layout.tokens() + 1));
  const size_t amax = scratch.take(sizeof(float));
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  using bf16 = __nv_bfloat16;
  return [=](const CudaKernelArgs& args) {
    int32_t* cu_seqlens = scratch_at<int32_t>(resources, cu);
    k::cu_seqlens_from_documents(cu_seqlens, has_documents ? args.inputs[3].as<const int32_t>() : nullptr,
                                 layout.batch, layout.sequence, args.stream);
    const bf16 *q = args.inputs[0].as<const bf16>(), *kk = args.inputs[1].as<const bf16>(),
               *v = args.inputs[2].as<const bf16>();
    // The flash kernel's epilogue skips its pending pass when the host knows the delayed amax; the
    // plain kernel's quantization below keeps its amax pass.
    const cuda::Fp8Output site{args.inputs[state].as<float>() + offset, scratch_at<float>(resources, amax),
                               args.outputs[2].as<uint8_t>(), args.outputs[3].as<float>(), cuda::Fp8Target::E4M3,
                               layout.flash && resources->fp8_delayed(site_index)};
    if (!site.delayed_known) CUDA_CHECK(cudaMemsetAsync(site.amax, 0, sizeof(float), args.stream));
    bf16* out = args.outputs[0].as<bf16>();
    if (layout.flash) {
      cuda::attention_forward_fp8(out, args.outputs[1].as<float>(), q, kk, v, cu_seqlens, flash_shape(layout), site,
                                  args.stream);
      return;
    }
    k::plain_attention_forward(out, args.outputs[1].as<float>(), q, kk, v, cu_seqlens, plain_shape(layout), args.stream);
    const int64_t count = layout.tokens() * layout.q_heads * layout.head_dim;
    cuda::fp8_record_amax(out, count, site.row, site.amax, args.stream);
    cuda::fp8_quantize(out, count, cuda::Fp8Target::E4M3, site.row, site.amax, site.q, site.scale_inv, args.stream);
  };
}

// attn_bwd_chunks (the node's backward_chunks): the flash backward runs on slices of ceil(B / N)
// batch rows in turn, so its fp32 workspace (dQ accumulator and delta) is one slice's. Documents
// never cross a row, so each slice is an independent attention problem: q, k, v, out, d_out and
// the gradients are contiguous per row; logsumexp ([Hq, B·T]) is read in place with the whole
// batch's row stride. The plain kernel (other head dims) has no workspace and runs whole.
template <typename T>
CudaKernel bind_attention_backward_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  const AttentionLayout layout = attention_layout(ctx);
  const bool has_documents = ctx.inputs.size() == 7;
  const size_t base = ctx.inputs.size() - 3;  // out, logsumexp, d_out
  expect_in(ctx, base + 1, DType::F32);
  const int64_t chunks = layout.flash ? std::clamp<int64_t>(ctx.attrs.integer_or("backward_chunks", 1), 1, layout.batch) : 1;
  const int64_t chunk_rows = (layout.batch + chunks - 1) / chunks;
  AttentionLayout slice_layout = layout;
  slice_layout.batch = chunk_rows;
  ScratchLayout scratch;
  const size_t cu = scratch.take(sizeof(int32_t) * (layout.tokens() + 1));
  const size_t workspace = scratch.take(
      layout.flash ? sizeof(float) * cuda::attention_backward_workspace_floats(flash_shape(slice_layout)) : 0);
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    int32_t* cu_seqlens = scratch_at<int32_t>(resources, cu);
    const int32_t* documents = has_documents ? args.inputs[3].as<const int32_t>() : nullptr;
    const T *q = args.inputs[0].as<const T>(), *kk = args.inputs[1].as<const T>(),
               *v = args.inputs[2].as<const T>(), *out = args.inputs[base].as<const T>(),
               *dout = args.inputs[base + 2].as<const T>();
    const float* lse = args.inputs[base + 1].as<const float>();
    T *dq = args.outputs[0].as<T>(), *dk = args.outputs[1].as<T>(), *dv = args.outputs[2].as<T>();
    if (layout.flash) {
      const int64_t q_row = layout.sequence * layout.q_heads * layout.head_dim;
      const int64_t kv_row = layout.sequence * layout.kv_heads * layout.head_dim;
      for (int64_t first = 0; first < layout.batch; first += chunk_rows) {
        AttentionLayout slice = layout;
        slice.batch = std::min(chunk_rows, layout.batch - first);
        k::cu_seqlens_from_documents(cu_seqlens, documents ? documents + first * layout.sequence : nullptr, slice.batch,
                                     layout.sequence, args.stream);
        cuda::AttentionShape shape = flash_shape(slice);
        shape.logsumexp_stride = layout.tokens();
        cuda::attention_backward(dq + first * q_row, dk + first * kv_row, dv + first * kv_row,
                                 scratch_at<float>(resources, workspace), dout + first * q_row, q + first * q_row,
                                 kk + first * kv_row, v + first * kv_row, out + first * q_row,
                                 lse + first * layout.sequence, cu_seqlens, shape, args.stream);
      }
    } else {
      k::cu_seqlens_from_documents(cu_seqlens, documents, layout.batch, layout.sequence, args.stream);
      k::plain_attention_backward(dq, dk, dv, dout, q, kk, v, out, lse, cu_seqlens, plain_shape(layout), args.stream);
    }
  };
}
CudaKernel bind_attention_backward(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_attention_backward_typed<T>(ctx); });
}

}  // namespace

void register_model_cuda_ops(CudaOpTable& table) {
  table.add("embedding", bind_embedding);
  table.add("embedding_backward", bind_embedding_backward);
  table.add("rmsnorm", bind_rmsnorm);
  table.add("rmsnorm_backward", bind_rmsnorm_backward);
  table.add("fused_residual_rmsnorm", bind_fused_residual_rmsnorm);
  table.add("fused_residual_rmsnorm_backward", bind_rmsnorm_backward);
  table.add("swiglu", bind_swiglu);
  table.add("swiglu_backward", bind_swiglu_backward);
  table.add("swiglu_fused", bind_swiglu_fused);
  table.add("swiglu_fused_backward", bind_swiglu_fused_backward);
  table.add("rope_cos_sin", bind_rope_cos_sin);
  table.add("rope", bind_rope);
  table.add("rope_backward", bind_rope_backward);
  table.add("attention", bind_attention);
  table.add("attention_fp8", bind_attention_fp8);
  table.add("attention_backward", bind_attention_backward);
}

}  // namespace surogate::runtime
