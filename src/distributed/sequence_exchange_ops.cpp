// sequence_to_heads / heads_to_sequence; see sequence_exchange_ops.h. Both kernels share one
// layout: a chunk for (or from) peer p is [B][T/N][(H/N)·D], so the all-to-all moves N equal
// contiguous chunks and packing is a copy of rows.
#include "distributed/sequence_exchange_ops.h"

#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"

namespace surogate::distributed {
namespace {
using namespace graph;

struct ExchangeShape {
  int64_t ranks = 1;
  int64_t heads = 1;
  int64_t head_dim = 1;
  int64_t batch = 1;
  int64_t local_tokens = 1;  // T / N
  int64_t group_width() const { return heads / ranks * head_dim; }  // (H/N)·D
  size_t chunk_floats() const { return static_cast<size_t>(batch * local_tokens * group_width()); }
};

ExchangeShape exchange_attrs(const InferContext& ctx) {
  ExchangeShape shape;
  shape.ranks = ctx.attrs.integer("ranks");
  shape.heads = ctx.attrs.integer("heads");
  shape.head_dim = ctx.attrs.integer("head_dim");
  if (shape.ranks < 1 || shape.heads < 1 || shape.head_dim < 1) {
    ctx.fail("attributes 'ranks', 'heads' and 'head_dim' must be positive");
  }
  if (shape.heads % shape.ranks != 0) ctx.fail("{} heads do not split over {} ranks", shape.heads, shape.ranks);
  ctx.expect_rank(0, 3);
  ctx.expect_floating(0);
  return shape;
}

// x [B, T/N, H·D] -> [B, T, (H/N)·D].
std::vector<TensorType> infer_to_heads(const InferContext& ctx) {
  const ExchangeShape shape = exchange_attrs(ctx);
  const TensorType& x = ctx.input(0);
  ctx.expect_dim(0, 2, shape.heads * shape.head_dim);
  return {{x.dtype, {x.shape[0], x.shape[1] * shape.ranks, shape.group_width()}}};
}

// y [B, T, (H/N)·D] -> [B, T/N, H·D].
std::vector<TensorType> infer_to_sequence(const InferContext& ctx) {
  const ExchangeShape shape = exchange_attrs(ctx);
  const TensorType& y = ctx.input(0);
  ctx.expect_dim(0, 2, shape.group_width());
  if (y.shape[1] % shape.ranks != 0) ctx.fail("{} tokens do not split over {} ranks", y.shape[1], shape.ranks);
  return {{y.dtype, {y.shape[0], y.shape[1] / shape.ranks, shape.heads * shape.head_dim}}};
}

// The bound shape (attrs and the sequence-parallel side's [B, T/N] from the binder's types).
ExchangeShape bound_shape(const CpuBindContext& ctx, bool to_heads) {
  std::vector<std::string> names{"x"};
  InferContext infer(ctx.node.op, ctx.attrs.where(), ctx.inputs, names, ctx.node.attrs);
  ExchangeShape shape = exchange_attrs(infer);
  const Shape& local = to_heads ? ctx.inputs[0].shape : ctx.outputs[0].shape;  // [B, T/N, H·D]
  shape.batch = local[0];
  shape.local_tokens = local[1];
  return shape;
}

// Copies one chunk's rows of (H/N)·D floats: chunk row (b, t), b < B, t < T/N, is the unpacked
// tensor's token `token_offset + t` of row b (`tokens` per row, `full_width` floats per token), from
// column `column`. to_chunks: unpacked → chunk; else chunk → unpacked.
void copy_rows(const ExchangeShape& shape, float* packed, float* full, int64_t token_offset, int64_t tokens,
               int64_t full_width, int64_t column, bool to_chunks) {
  const int64_t width = shape.group_width();
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t t = 0; t < shape.local_tokens; ++t) {
      float* chunk_row = packed + (b * shape.local_tokens + t) * width;
      float* full_row = full + (b * tokens + token_offset + t) * full_width + column;
      if (to_chunks) std::memcpy(chunk_row, full_row, static_cast<size_t>(width) * sizeof(float));
      else std::memcpy(full_row, chunk_row, static_cast<size_t>(width) * sizeof(float));
    }
  }
}

CpuKernel bind_exchange(const CpuBindContext& ctx, Communicator* group, bool to_heads) {
  SUROGATE_CHECK(group != nullptr,
                 "node '{}' (op {}) was bound from the planning registry; a sequence-parallel rank binds its backend "
                 "from a registry made with its sequence group's communicator", ctx.node.name, ctx.node.op);
  if (ctx.inputs[0].dtype != DType::F32) {
    fail_user("node '{}' (op {}): the CPU backend exchanges F32 tensors, got {}", ctx.node.name, ctx.node.op,
              dtype_safetensors_name(ctx.inputs[0].dtype));
  }
  const ExchangeShape shape = bound_shape(ctx, to_heads);
  SUROGATE_CHECK(group->world_size() == shape.ranks, "node '{}': a sequence group of {} ranks runs a plan for {}",
                 ctx.node.name, group->world_size(), shape.ranks);
  const size_t total = shape.chunk_floats() * static_cast<size_t>(shape.ranks);
  // Scratch sized once here: the kernel allocates nothing of its own.
  auto sent = std::make_shared<std::vector<float>>(total);
  auto received = std::make_shared<std::vector<float>>(total);
  return [=](const CpuKernelArgs& args) {
    const int64_t ranks = shape.ranks, tokens = shape.local_tokens * ranks, width = shape.group_width();
    const int64_t full_width = shape.heads * shape.head_dim;
    float* input = args.inputs[0].as<float>();
    float* output = args.outputs[0].as<float>();
    for (int64_t peer = 0; peer < ranks; ++peer) {
      float* chunk = sent->data() + static_cast<size_t>(peer) * shape.chunk_floats();
      if (to_heads) {
        // To peer p: my tokens, head group p (columns [p·width, (p+1)·width) of x).
        copy_rows(shape, chunk, input, 0, shape.local_tokens, full_width, peer * width, true);
      } else {
        // To peer p: tokens [p·T/N, (p+1)·T/N) of my head group.
        copy_rows(shape, chunk, input, peer * shape.local_tokens, tokens, width, 0, true);
      }
    }
    group->all_to_all(sent->data(), received->data(), shape.chunk_floats(), DType::F32);
    for (int64_t peer = 0; peer < ranks; ++peer) {
      float* chunk = received->data() + static_cast<size_t>(peer) * shape.chunk_floats();
      if (to_heads) {
        // From peer p: its tokens [p·T/N, (p+1)·T/N) of my head group.
        copy_rows(shape, chunk, output, peer * shape.local_tokens, tokens, width, 0, false);
      } else {
        // From peer p: my tokens of head group p.
        copy_rows(shape, chunk, output, 0, shape.local_tokens, full_width, peer * width, false);
      }
    }
  };
}

OpDef exchange_op(const char* name, const char* inverse, bool to_heads, Communicator* group) {
  return OpDef{
      .name = name,
      .inputs = {"x"},
      .outputs = {"out"},
      .infer = to_heads ? ShapeRule(infer_to_heads) : ShapeRule(infer_to_sequence),
      .gradient = [inverse](GradientContext& ctx) -> InputGradients {
        if (!ctx.needs_input_grad(0)) return {std::nullopt};
        return {ctx.op(inverse, {ctx.output_grad(0)}, ctx.attrs().raw()).ids[0]};
      },
      .cpu = [group, to_heads](const CpuBindContext& ctx) { return bind_exchange(ctx, group, to_heads); },
  };
}

}  // namespace

void register_sequence_exchange_ops(OpRegistry& registry, Communicator* sequence_group) {
  registry.add(exchange_op(kSequenceToHeads, kHeadsToSequence, true, sequence_group));
  registry.add(exchange_op(kHeadsToSequence, kSequenceToHeads, false, sequence_group));
}

}  // namespace surogate::distributed
