// Graph ops "attention" and "attention_backward", over ops/attention.h (causal GQA softmax
// attention, document masking, sliding window, flash-attention's logsumexp convention).
//   attention(q, k, v [, document_ids I32 [B, T]]) -> out (q's type), logsumexp [B, Hq, T]
//     q [B, T, Hq, D], k, v [B, T, Hkv, D]  (heads from the shapes), or flat
//     q [B, T, Hq·D], k, v [B, T, Hkv·D] with attrs {query_heads, kv_heads, head_dim}.
//     attrs: window (0 = full causal), scale (0 = 1/√D), causal (true; false: bidirectional
//     within each document, as vision towers attend; CPU backend only).
//   attention_backward(q, k, v [, document_ids], out, logsumexp, d_out) -> d_q, d_k, d_v (same attrs).
//     attr backward_chunks (attn_bwd_chunks, default 1): the backward runs on that many slices of
//     the batch rows in turn (ceil(B / N) rows each), which caps the GPU kernel's workspace at one
//     slice's; rows are independent (documents never cross a row), so the result is the same.
#include <algorithm>

#include "ops/attention.h"
#include "ops/defs/attention_heads.h"
#include "ops/defs/def_util.h"
#include "ops/defs/statistic_dtype.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

// Checks q, k, v (indices 0..2) and document_ids (3, when `has_documents`); returns the shape.
AttentionShape attention_layout(const InferContext& ctx, bool has_documents) {
  AttentionShape shape = with_heads<AttentionShape>(attention_heads(ctx));
  if (has_documents) {
    ctx.expect_dtype(3, DType::I32);
    if (ctx.input(3).shape != Shape{shape.batch, shape.sequence}) {
      ctx.fail("{} must be I32{}", ctx.input_label(3), format_shape({shape.batch, shape.sequence}));
    }
  }
  shape.window = ctx.attrs.integer_or("window", 0);
  if (shape.window < 0) ctx.fail("attribute 'window' must be 0 (full causal) or positive, got {}", shape.window);
  if (ctx.attrs.integer_or("backward_chunks", 1) < 1) ctx.fail("attribute 'backward_chunks' must be at least 1");
  shape.scale = ctx.attrs.number_or("scale", 0.0);
  shape.causal = ctx.attrs.boolean_or("causal", true);
  if (!shape.causal && shape.window != 0) ctx.fail("attribute 'window' needs causal attention (causal: false given)");
  return shape;
}

// attention has 3 or 4 inputs; attention_backward 6 or 7: document ids are present when the
// count is the larger one.
AttentionShape bound_shape(const CpuBindContext& ctx, bool has_documents) {
  std::vector<std::string> names{"q", "k", "v", "document_ids", "out", "logsumexp", "d_out"};
  InferContext infer(ctx.node.op, ctx.attrs.where(), ctx.inputs, names, ctx.node.attrs);
  return attention_layout(infer, has_documents);
}

void register_attention(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "attention",
      .inputs = {"q", "k", "v", "document_ids"},
      .outputs = {"out", "logsumexp"},
      .infer = [](const InferContext& ctx) {
        if (ctx.input_count() != 3 && ctx.input_count() != 4) {
          ctx.fail("attention takes q, k, v and optional document_ids, got {} inputs", ctx.input_count());
        }
        AttentionShape shape = attention_layout(ctx, ctx.input_count() == 4);
        return std::vector<TensorType>{ctx.input(0),
                                       {statistic_dtype(ctx.input(0).dtype), Shape{shape.batch, shape.query_heads, shape.sequence}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        if (ctx.has_output_grad(1)) {
          fail_user("{}: the logsumexp output of attention is not differentiable; use only 'out' in the loss",
                    ctx.attrs().where());
        }
        // The document ids (I32) as the fourth input; attention_fp8 (ops/defs/fp8_output_def.cpp)
        // appends its F32 scaling state after the inputs, which is not one.
        const std::vector<TensorId>& in = ctx.node().inputs;
        const bool has_documents = in.size() >= 4 && ctx.builder.tensor(in[3]).type.dtype == DType::I32;
        std::vector<TensorId> inputs{ctx.input(0), ctx.input(1), ctx.input(2)};
        if (has_documents) inputs.push_back(ctx.input(3));
        inputs.insert(inputs.end(), {ctx.output(0), ctx.output(1), ctx.output_grad(0)});
        auto grads = ctx.op("attention_backward", inputs, ctx.attrs().raw());
        InputGradients result{if_needed(ctx, 0, grads[0]), if_needed(ctx, 1, grads[1]), if_needed(ctx, 2, grads[2])};
        if (has_documents) result.push_back(std::nullopt);
        return result;
      },
      .cpu = [](const CpuBindContext& ctx) {
        bool has_documents = ctx.inputs.size() == 4;
        AttentionShape shape = bound_shape(ctx, has_documents);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            attention_forward(shape, args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(),
                              has_documents ? args.inputs[3].as<int32_t>() : nullptr, args.outputs[0].as<T>(),
                              args.outputs[1].as<T>());
          };
        });
      },
      .variadic_inputs = true,
      // logsumexp 1e-4, out 1e-2, dq / dk / dv 2e-2 (test_model_kernels.cpp, tests/cuda/test_attention.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 2e-2},
  });
  registry.add(OpDef{
      .name = "attention_backward",
      .inputs = {"q", "k", "v", "document_ids", "out", "logsumexp", "d_out"},
      .outputs = {"d_q", "d_k", "d_v"},
      .infer = [](const InferContext& ctx) {
        if (ctx.input_count() != 6 && ctx.input_count() != 7) {
          ctx.fail("attention_backward takes q, k, v, [document_ids,] out, logsumexp, d_out; got {} inputs",
                   ctx.input_count());
        }
        size_t base = ctx.input_count() - 3;
        AttentionShape shape = attention_layout(ctx, ctx.input_count() == 7);
        ctx.expect_same_type(base, 0);
        ctx.expect_same_type(base + 2, 0);
        DType lse_dtype = statistic_dtype(ctx.input(0).dtype);
        if (ctx.input(base + 1) != TensorType{lse_dtype, Shape{shape.batch, shape.query_heads, shape.sequence}}) {
          ctx.fail("{} must be {}[B, Hq, T]", ctx.input_label(base + 1), dtype_safetensors_name(lse_dtype));
        }
        return std::vector<TensorType>{ctx.input(0), ctx.input(1), ctx.input(2)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        bool has_documents = ctx.inputs.size() == 7;
        AttentionShape shape = bound_shape(ctx, has_documents);
        size_t base = ctx.inputs.size() - 3;
        const int64_t chunks = std::min(ctx.attrs.integer_or("backward_chunks", 1), shape.batch);
        const int64_t chunk_rows = (shape.batch + chunks - 1) / chunks;
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            // Per batch row: q / out / d_q hold T·Hq·D values, k / v / d_k / d_v T·Hkv·D,
            // logsumexp Hq·T, document_ids T.
            const int64_t q_row = shape.sequence * shape.query_heads * shape.head_dim;
            const int64_t kv_row = shape.sequence * shape.kv_heads * shape.head_dim;
            const int64_t lse_row = shape.query_heads * shape.sequence;
            for (int64_t first = 0; first < shape.batch; first += chunk_rows) {
              AttentionShape slice = shape;
              slice.batch = std::min(chunk_rows, shape.batch - first);
              const int32_t* documents = has_documents ? args.inputs[3].as<int32_t>() + first * shape.sequence : nullptr;
              attention_backward(slice, args.inputs[0].as<T>() + first * q_row, args.inputs[1].as<T>() + first * kv_row,
                                 args.inputs[2].as<T>() + first * kv_row, documents,
                                 args.inputs[base].as<T>() + first * q_row,
                                 args.inputs[base + 1].as<T>() + first * lse_row,
                                 args.inputs[base + 2].as<T>() + first * q_row, args.outputs[0].as<T>() + first * q_row,
                                 args.outputs[1].as<T>() + first * kv_row, args.outputs[2].as<T>() + first * kv_row);
            }
          };
        });
      },
      .variadic_inputs = true,
      // logsumexp 1e-4, out 1e-2, dq / dk / dv 2e-2 (test_model_kernels.cpp, tests/cuda/test_attention.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 2e-2},
  });
}

}  // namespace

void register_attention_ops(OpRegistry& registry) { register_attention(registry); }

}  // namespace surogate::ops::defs
