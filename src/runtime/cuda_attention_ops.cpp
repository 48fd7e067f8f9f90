// CUDA binders of attention, attention_fp8 and attention_backward (ops/defs/attention_def.cpp).
// Each shape runs on one path for the whole process (runtime/cuda_attention_path.h): cuDNN's
// fused SDPA, or our kernels (head dims 32/64/128 the flash kernels, other dims up to 256 a plain
// kernel; bidirectional attention, causal: false, at a head dim that is a multiple of 8 below 128
// runs the flash kernels on zero-padded copies, see padded_head_dim). Both take document ids [B, T] as cu_seqlens over the B·T flattened tokens, built per
// call on the device (cuda/kernels/plain_attention.h). The logsumexp output is private to the
// path that wrote it and read only by the same path's attention_backward: our kernels lay it out
// [Hq, B·T], cuDNN [B, Hq, T] (the CPU's layout) or, with packed documents, [B·T, Hq].
#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/cudnn_attention.h"
#include "cuda/kernels/attention.h"
#include "cuda/kernels/plain_attention.h"
#include "runtime/cuda_attention_path.h"
#include "runtime/cuda_bind_checks.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

namespace k = cuda;

struct AttentionLayout {
  int64_t batch = 0, sequence = 0;
  int q_heads = 0, kv_heads = 0, head_dim = 0, window = 0;
  float scale = 0.0f;
  bool flash = false;
  bool causal = true;
  int padded = 0;  // > 0: the head dim the flash kernels run this (bidirectional) shape at
  int64_t tokens() const { return batch * sequence; }
};

// Bidirectional attention at a head dim the flash kernels lack, a multiple of 8 below 128 (the
// Qwen2.5-VL tower's 80), runs them at the next of 32 / 64 / 128 on zero-padded copies of q, k, v
// (and out, d_out): the zero columns add nothing to the scores and give zero output and gradient
// columns, which the copy back drops; the scale stays the real head dim's. 0: no padding (causal
// shapes keep the plain kernel there).
int padded_head_dim(const AttentionLayout& layout) {
  if (layout.causal || layout.flash || layout.head_dim % 8 != 0 || layout.head_dim > 128) return 0;
  return layout.head_dim <= 32 ? 32 : layout.head_dim <= 64 ? 64 : 128;
}

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
  layout.causal = ctx.attrs.boolean_or("causal", true);
  const double scale = ctx.attrs.number_or("scale", 0.0);
  layout.scale = static_cast<float>(scale > 0.0 ? scale : 1.0 / std::sqrt(static_cast<double>(layout.head_dim)));
  layout.flash = layout.head_dim == 32 || layout.head_dim == 64 || layout.head_dim == 128;
  require(ctx, layout.flash || layout.head_dim <= 256, "the CUDA attention supports head_dim up to 256, got {}",
          layout.head_dim);
  layout.padded = padded_head_dim(layout);
  require(ctx, layout.tokens() < (int64_t{1} << 31), "the CUDA attention takes fewer than 2^31 tokens per call");
  return layout;
}

cuda::AttentionShape flash_shape(const AttentionLayout& layout) {
  // `documents` is an upper bound: cu_seqlens_from_documents pads past the last document.
  cuda::AttentionShape shape{layout.tokens(), layout.q_heads, layout.kv_heads,
                             layout.padded > 0 ? layout.padded : layout.head_dim,
                             static_cast<int>(layout.tokens()), layout.window, layout.scale,
                             static_cast<int>(layout.sequence)};
  shape.causal = layout.causal;
  return shape;
}

k::PlainAttentionShape plain_shape(const AttentionLayout& layout) {
  k::PlainAttentionShape shape{layout.tokens(), layout.q_heads, layout.kv_heads, layout.head_dim, layout.window,
                               layout.scale};
  shape.causal = layout.causal;
  return shape;
}

// The zero-padded operands of a padded shape in scratch (16-bit): `count` q-shaped ([tokens,
// q_heads, padded]) and as many kv-shaped ([tokens, kv_heads, padded]) buffers.
struct PaddedBuffers {
  size_t q = 0, kv = 0, q_bytes = 0, kv_bytes = 0;
};
PaddedBuffers take_padded(ScratchLayout& scratch, const AttentionLayout& layout, int count) {
  PaddedBuffers buffers;
  if (layout.padded == 0 || count == 0) return buffers;
  buffers.q_bytes = sizeof(uint16_t) * static_cast<size_t>(layout.tokens() * layout.q_heads * layout.padded);
  buffers.kv_bytes = sizeof(uint16_t) * static_cast<size_t>(layout.tokens() * layout.kv_heads * layout.padded);
  buffers.q = scratch.take(buffers.q_bytes * count);
  buffers.kv = scratch.take(buffers.kv_bytes * count);
  return buffers;
}

// rows × dim → rows × padded with zero columns (a memset, then a strided device copy), and back.
template <typename T>
void pad_heads(T* padded, const T* source, int64_t rows, const AttentionLayout& layout, cudaStream_t stream) {
  const size_t row = sizeof(T) * layout.head_dim, padded_row = sizeof(T) * layout.padded;
  CUDA_CHECK(cudaMemsetAsync(padded, 0, padded_row * rows, stream));
  CUDA_CHECK(cudaMemcpy2DAsync(padded, padded_row, source, row, row, rows, cudaMemcpyDeviceToDevice, stream));
}
template <typename T>
void unpad_heads(T* target, const T* padded, int64_t rows, const AttentionLayout& layout, cudaStream_t stream) {
  const size_t row = sizeof(T) * layout.head_dim, padded_row = sizeof(T) * layout.padded;
  CUDA_CHECK(cudaMemcpy2DAsync(target, row, padded, padded_row, row, rows, cudaMemcpyDeviceToDevice, stream));
}

// The cuDNN shape of this node when its path is cuDNN's (attention_path decides, once per shape).
std::optional<cuda::CudnnAttentionShape> cudnn_shape(const AttentionLayout& layout, bool documents, DType dtype) {
  cuda::CudnnAttentionShape shape{.batch = layout.batch,   .sequence = layout.sequence, .q_heads = layout.q_heads,
                                  .kv_heads = layout.kv_heads, .head_dim = layout.head_dim, .window = layout.window,
                                  .scale = layout.scale,       .documents = documents,      .half = dtype == DType::F16,
                                  .causal = layout.causal};
  if (!attention_path(shape).cudnn) return std::nullopt;
  return shape;
}

// The scratch of one attention step: cu_seqlens (our kernels), the path's workspace and, for a
// padded shape, its padded operands (`padded_buffers` of each shape: 2 forward, 4 backward).
struct AttentionScratch {
  size_t cu = 0, workspace = 0;
  PaddedBuffers padded;
};
AttentionScratch reserve_attention_scratch(const CudaBindContext& ctx, const AttentionLayout& layout,
                                           size_t workspace_bytes, size_t extra_floats = 0,
                                           int padded_buffers = 0) {
  ScratchLayout scratch;
  AttentionScratch pieces;
  pieces.cu = scratch.take(sizeof(int32_t) * (layout.tokens() + 1));
  pieces.workspace = scratch.take(workspace_bytes + sizeof(float) * extra_floats);
  pieces.padded = take_padded(scratch, layout, padded_buffers);
  ctx.resources.reserve_scratch(scratch.bytes);
  return pieces;
}

// The flash forward of a padded shape: q, k, v padded into scratch, the output through a padded
// buffer (q, out | k, v).
template <typename T>
void padded_forward(T* out, float* logsumexp, const T* q, const T* k, const T* v, const int32_t* cu_seqlens,
                    const AttentionLayout& layout, CudaResources* resources, const PaddedBuffers& b,
                    cudaStream_t stream) {
  T *padded_q = scratch_at<T>(resources, b.q), *padded_out = scratch_at<T>(resources, b.q + b.q_bytes);
  T *padded_k = scratch_at<T>(resources, b.kv), *padded_v = scratch_at<T>(resources, b.kv + b.kv_bytes);
  const int64_t q_rows = layout.tokens() * layout.q_heads, kv_rows = layout.tokens() * layout.kv_heads;
  pad_heads(padded_q, q, q_rows, layout, stream);
  pad_heads(padded_k, k, kv_rows, layout, stream);
  pad_heads(padded_v, v, kv_rows, layout, stream);
  cuda::attention_forward(padded_out, logsumexp, padded_q, padded_k, padded_v, cu_seqlens, flash_shape(layout),
                          stream);
  unpad_heads(out, padded_out, q_rows, layout, stream);
}

// The flash backward of a padded shape (q, out, d_out, d_q | k, v, d_k, d_v padded in scratch).
struct BackwardOperands {
  const void *q, *k, *v, *out, *dout;
  const float* logsumexp;
  void *dq, *dk, *dv;
};
template <typename T>
void padded_backward(const BackwardOperands& o, float* workspace, const int32_t* cu_seqlens,
                     const AttentionLayout& layout, CudaResources* resources, const PaddedBuffers& b,
                     cudaStream_t stream) {
  auto q_buffer = [&](int i) { return scratch_at<T>(resources, b.q + i * b.q_bytes); };
  auto kv_buffer = [&](int i) { return scratch_at<T>(resources, b.kv + i * b.kv_bytes); };
  const int64_t q_rows = layout.tokens() * layout.q_heads, kv_rows = layout.tokens() * layout.kv_heads;
  pad_heads(q_buffer(0), static_cast<const T*>(o.q), q_rows, layout, stream);
  pad_heads(q_buffer(1), static_cast<const T*>(o.out), q_rows, layout, stream);
  pad_heads(q_buffer(2), static_cast<const T*>(o.dout), q_rows, layout, stream);
  pad_heads(kv_buffer(0), static_cast<const T*>(o.k), kv_rows, layout, stream);
  pad_heads(kv_buffer(1), static_cast<const T*>(o.v), kv_rows, layout, stream);
  cuda::attention_backward(q_buffer(3), kv_buffer(2), kv_buffer(3), workspace, q_buffer(2), q_buffer(0),
                           kv_buffer(0), kv_buffer(1), q_buffer(1), o.logsumexp, cu_seqlens, flash_shape(layout),
                           stream);
  unpad_heads(static_cast<T*>(o.dq), q_buffer(3), q_rows, layout, stream);
  unpad_heads(static_cast<T*>(o.dk), kv_buffer(2), kv_rows, layout, stream);
  unpad_heads(static_cast<T*>(o.dv), kv_buffer(3), kv_rows, layout, stream);
}

const int32_t* documents_input(const CudaKernelArgs& args, bool has_documents) {
  return has_documents ? args.inputs[3].as<const int32_t>() : nullptr;
}

template <typename T>
CudaKernel bind_attention_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  expect_out(ctx, 1, DType::F32);
  const AttentionLayout layout = attention_layout(ctx);
  const bool has_documents = ctx.inputs.size() == 4;
  const std::optional<cuda::CudnnAttentionShape> cudnn = cudnn_shape(layout, has_documents, element_dtype<T>());
  const AttentionScratch scratch = reserve_attention_scratch(
      ctx, layout, cudnn ? cuda::cudnn_attention_forward_workspace(*cudnn) : 0, 0, cudnn ? 0 : 2);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    const T *q = args.inputs[0].as<const T>(), *kk = args.inputs[1].as<const T>(),
               *v = args.inputs[2].as<const T>();
    if (cudnn) {
      cuda::cudnn_attention_forward(args.outputs[0].data, args.outputs[1].as<float>(), q, kk, v,
                                    documents_input(args, has_documents),
                                    scratch_at<std::byte>(resources, scratch.workspace), *cudnn, args.stream);
      return;
    }
    int32_t* cu_seqlens = scratch_at<int32_t>(resources, scratch.cu);
    k::cu_seqlens_from_documents(cu_seqlens, documents_input(args, has_documents), layout.batch, layout.sequence,
                                 args.stream);
    if (layout.padded > 0) {
      padded_forward(args.outputs[0].as<T>(), args.outputs[1].as<float>(), q, kk, v, cu_seqlens, layout, resources,
                     scratch.padded, args.stream);
    } else if (layout.flash) {
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
// the flash forward with the FP8 epilogue (cuda/kernels/attention.h); cuDNN's forward and the
// plain forward (other head sizes) are followed by the site's quantization as quantize_fp8 runs it.
CudaKernel bind_attention_fp8(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  expect_out(ctx, 1, DType::F32);
  const size_t state = ctx.inputs.size() - 1;
  const AttentionLayout layout = attention_layout(ctx);
  require(ctx, layout.causal, "attention_fp8 is causal (a decoder's); causal: false runs the 16-bit attention");
  const bool has_documents = state == 4;
  const int64_t offset = ctx.attrs.integer("site") * ctx.inputs[state].shape[1];
  const int64_t site_index = ctx.attrs.integer("site");
  const std::optional<cuda::CudnnAttentionShape> cudnn = cudnn_shape(layout, has_documents, DType::BF16);
  // The amax float sits after the path's workspace.
  const size_t workspace_bytes = cudnn ? cuda::cudnn_attention_forward_workspace(*cudnn) : 0;
  const AttentionScratch scratch = reserve_attention_scratch(ctx, layout, workspace_bytes, 1);
  const bool epilogue = !cudnn && layout.flash;  // the flash kernel quantizes in its epilogue
  CudaResources* resources = &ctx.resources;
  using bf16 = __nv_bfloat16;
  return [=](const CudaKernelArgs& args) {
    int32_t* cu_seqlens = scratch_at<int32_t>(resources, scratch.cu);
    if (!cudnn) {  // cuDNN reads the document ids
      k::cu_seqlens_from_documents(cu_seqlens, documents_input(args, has_documents), layout.batch, layout.sequence,
                                   args.stream);
    }
    const bf16 *q = args.inputs[0].as<const bf16>(), *kk = args.inputs[1].as<const bf16>(),
               *v = args.inputs[2].as<const bf16>();
    // The flash kernel's epilogue skips its pending pass when the host knows the delayed amax; the
    // quantization below keeps its amax pass.
    const cuda::Fp8Output site{args.inputs[state].as<float>() + offset,
                               scratch_at<float>(resources, scratch.workspace + workspace_bytes),
                               args.outputs[2].as<uint8_t>(), args.outputs[3].as<float>(), cuda::Fp8Target::E4M3,
                               epilogue && resources->fp8_delayed(site_index)};
    if (!site.delayed_known) CUDA_CHECK(cudaMemsetAsync(site.amax, 0, sizeof(float), args.stream));
    bf16* out = args.outputs[0].as<bf16>();
    if (epilogue) {
      cuda::attention_forward_fp8(out, args.outputs[1].as<float>(), q, kk, v, cu_seqlens, flash_shape(layout), site,
                                  args.stream);
      return;
    }
    if (cudnn) {
      cuda::cudnn_attention_forward(out, args.outputs[1].as<float>(), q, kk, v, documents_input(args, has_documents),
                                    scratch_at<std::byte>(resources, scratch.workspace), *cudnn, args.stream);
    } else {
      k::plain_attention_forward(out, args.outputs[1].as<float>(), q, kk, v, cu_seqlens, plain_shape(layout),
                                 args.stream);
    }
    const int64_t count = layout.tokens() * layout.q_heads * layout.head_dim;
    cuda::fp8_record_amax(out, count, site.row, site.amax, args.stream);
    cuda::fp8_quantize(out, count, cuda::Fp8Target::E4M3, site.row, site.amax, site.q, site.scale_inv, args.stream);
  };
}

// attn_bwd_chunks (the node's backward_chunks): the flash backward runs on slices of ceil(B / N)
// batch rows in turn, so its fp32 workspace (dQ accumulator and delta) is one slice's. Documents
// never cross a row, so each slice is an independent attention problem: q, k, v, out, d_out and
// the gradients are contiguous per row; logsumexp ([Hq, B·T]) is read in place with the whole
// batch's row stride. The plain kernel (other head dims) has no workspace and runs whole, and so
// does cuDNN (its workspace is counted whole).
template <typename T>
CudaKernel bind_attention_backward_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  const AttentionLayout layout = attention_layout(ctx);
  const bool has_documents = ctx.inputs.size() == 7;
  const size_t base = ctx.inputs.size() - 3;  // out, logsumexp, d_out
  expect_in(ctx, base + 1, DType::F32);
  const std::optional<cuda::CudnnAttentionShape> cudnn = cudnn_shape(layout, has_documents, element_dtype<T>());
  const bool flash = !cudnn && layout.flash;
  const bool padded = !cudnn && layout.padded > 0;  // the flash kernels, whole (no chunks)
  const int64_t chunks = flash ? std::clamp<int64_t>(ctx.attrs.integer_or("backward_chunks", 1), 1, layout.batch) : 1;
  const int64_t chunk_rows = (layout.batch + chunks - 1) / chunks;
  AttentionLayout slice_layout = layout;
  slice_layout.batch = chunk_rows;
  const size_t workspace_bytes =
      cudnn ? cuda::cudnn_attention_backward_workspace(*cudnn)
            : flash || padded ? sizeof(float) * cuda::attention_backward_workspace_floats(flash_shape(slice_layout))
                              : 0;
  const AttentionScratch scratch = reserve_attention_scratch(ctx, layout, workspace_bytes, 0, padded ? 4 : 0);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    int32_t* cu_seqlens = scratch_at<int32_t>(resources, scratch.cu);
    const int32_t* documents = documents_input(args, has_documents);
    const T *q = args.inputs[0].as<const T>(), *kk = args.inputs[1].as<const T>(),
               *v = args.inputs[2].as<const T>(), *out = args.inputs[base].as<const T>(),
               *dout = args.inputs[base + 2].as<const T>();
    const float* lse = args.inputs[base + 1].as<const float>();
    T *dq = args.outputs[0].as<T>(), *dk = args.outputs[1].as<T>(), *dv = args.outputs[2].as<T>();
    if (flash) {
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
                                 scratch_at<float>(resources, scratch.workspace), dout + first * q_row,
                                 q + first * q_row, kk + first * kv_row, v + first * kv_row, out + first * q_row,
                                 lse + first * layout.sequence, cu_seqlens, shape, args.stream);
      }
      return;
    }
    if (cudnn) {
      cuda::cudnn_attention_backward(dq, dk, dv, dout, q, kk, v, out, lse, documents,
                                     scratch_at<std::byte>(resources, scratch.workspace), *cudnn, args.stream);
      return;
    }
    k::cu_seqlens_from_documents(cu_seqlens, documents, layout.batch, layout.sequence, args.stream);
    if (padded) {
      padded_backward<T>({q, kk, v, out, dout, lse, dq, dk, dv}, scratch_at<float>(resources, scratch.workspace),
                         cu_seqlens, layout, resources, scratch.padded, args.stream);
      return;
    }
    k::plain_attention_backward(dq, dk, dv, dout, q, kk, v, out, lse, cu_seqlens, plain_shape(layout), args.stream);
  };
}
CudaKernel bind_attention_backward(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_attention_backward_typed<T>(ctx); });
}

}  // namespace

void register_attention_cuda_ops(CudaOpTable& table) {
  table.add("attention", bind_attention);
  table.add("attention_fp8", bind_attention_fp8);
  table.add("attention_backward", bind_attention_backward);
}

}  // namespace surogate::runtime
