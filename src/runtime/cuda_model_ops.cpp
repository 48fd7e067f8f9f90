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
//  * the attention ops have their own file, runtime/cuda_attention_ops.cpp.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels/elementwise_16bit.h"
#include "cuda/kernels/embedding.h"
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


template <typename T>
CudaKernel bind_swiglu_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  const int64_t channels = last(ctx.inputs[0]), rows = ctx.inputs[0].numel() / channels;
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

// A kernel writing cos / sin tables in the output dtype (F32, BF16 or F16): tables<Table>(args).
template <typename Tables>
CudaKernel bind_table_writer(const CudaBindContext& ctx, Tables tables) {
  const DType dtype = ctx.outputs[0].dtype;
  require(ctx, dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16,
          "the CUDA backend writes F32, BF16 or F16 RoPE tables, not {}", dtype_safetensors_name(dtype));
  if (dtype == DType::F32) return [=](const CudaKernelArgs& args) { tables.template operator()<float>(args); };
  return by_element_type(dtype, [&]<typename T>() -> CudaKernel {
    return [=](const CudaKernelArgs& args) { tables.template operator()<T>(args); };
  });
}

CudaKernel bind_rope_cos_sin(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::I32);
  auto device_inverse = device_inverse_frequency(ctx);
  const float scaling = static_cast<float>(ctx.attrs.number_or("attention_scaling", 1.0));
  const int half = static_cast<int>(device_inverse->size());
  const int64_t tokens = ctx.inputs[0].numel();
  return bind_table_writer(ctx, [=]<typename Table>(const CudaKernelArgs& args) {
    k::rope_tables(args.outputs[0].as<Table>(), args.outputs[1].as<Table>(), args.inputs[0].as<const int32_t>(),
                   device_inverse->data(), tokens, half, scaling, args.stream);
  });
}

// mrope_cos_sin: position_ids [3, ...], mrope_section [t, h, w] (validated by the op's infer).
CudaKernel bind_mrope_cos_sin(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::I32);
  auto device_inverse = device_inverse_frequency(ctx);
  const float scaling = static_cast<float>(ctx.attrs.number_or("attention_scaling", 1.0));
  const int half = static_cast<int>(device_inverse->size());
  const int64_t tokens = ctx.inputs[0].numel() / 3;
  const std::vector<int64_t> sections = ctx.attrs.integers("mrope_section");
  const int section_t = static_cast<int>(sections.at(0)), section_h = static_cast<int>(sections.at(1));
  const int section_w = static_cast<int>(sections.at(2));
  const bool interleaved = ctx.attrs.boolean_or("mrope_interleaved", false);
  return bind_table_writer(ctx, [=]<typename Table>(const CudaKernelArgs& args) {
    k::mrope_tables(args.outputs[0].as<Table>(), args.outputs[1].as<Table>(), args.inputs[0].as<const int32_t>(),
                    device_inverse->data(), tokens, half, section_t, section_h, section_w, interleaved, scaling,
                    args.stream);
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
  table.add("mrope_cos_sin", bind_mrope_cos_sin);
  table.add("rope", bind_rope);
  table.add("rope_backward", bind_rope_backward);
}

}  // namespace surogate::runtime
