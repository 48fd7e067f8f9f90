// CUDA binders of the exchange ops; see sequence_exchange_cuda.h. A chunk for (or from) peer p is
// [B][T/N][(H/N)·D] contiguous, so packing and unpacking are one 2-D copy per peer:
//   sequence_to_heads  pack:   x[b, t, p·w : (p+1)·w]        rows B·T/N, source pitch H·D
//                      unpack: out[b, p·T/N + t, :]          rows B of T/N·w, destination pitch T·w
//   heads_to_sequence  pack:   y[b, p·T/N + t, :]            rows B of T/N·w, source pitch T·w
//                      unpack: out[b, t, p·w : (p+1)·w]      rows B·T/N, destination pitch H·D
// with w = (H/N)·D.
#include "distributed/sequence_exchange_cuda.h"

#include <cuda_runtime_api.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "distributed/sequence_exchange_ops.h"

namespace surogate::distributed {
namespace {

struct Exchange {
  int64_t ranks = 1, batch = 1, local_tokens = 1, width = 1, full_width = 1;  // width = (H/N)·D
  size_t element = 2;
  size_t chunk_elements() const { return static_cast<size_t>(batch * local_tokens * width); }
};

runtime::CudaKernel bind(const runtime::CudaBindContext& ctx, const SequenceGroupSlot* slot, bool to_heads) {
  const DType dtype = ctx.inputs[0].dtype;
  if (dtype != DType::BF16 && dtype != DType::F32) {
    fail_user("node '{}' (op {}): the CUDA backend exchanges BF16 or F32 tensors, got {}", ctx.node.name, ctx.node.op,
              dtype_safetensors_name(dtype));
  }
  Exchange shape;
  shape.ranks = ctx.attrs.integer("ranks");
  const int64_t heads = ctx.attrs.integer("heads"), head_dim = ctx.attrs.integer("head_dim");
  shape.width = heads / shape.ranks * head_dim;
  shape.full_width = heads * head_dim;
  const graph::Shape& local = to_heads ? ctx.inputs[0].shape : ctx.outputs[0].shape;  // [B, T/N, H·D]
  shape.batch = local[0];
  shape.local_tokens = local[1];
  shape.element = dtype_size_bytes(dtype);
  runtime::ScratchLayout scratch;
  const size_t total_bytes = shape.chunk_elements() * static_cast<size_t>(shape.ranks) * shape.element;
  const size_t sent_at = scratch.take(total_bytes), received_at = scratch.take(total_bytes);
  ctx.resources.reserve_scratch(scratch.bytes);
  runtime::CudaResources* resources = &ctx.resources;
  return [=](const runtime::CudaKernelArgs& args) {
    SUROGATE_CHECK(slot->communicator != nullptr && slot->communicator->world_size() == shape.ranks,
                   "the rank's sequence group ({} ranks) is connected before its plan runs", shape.ranks);
    auto* sent = runtime::scratch_at<std::byte>(resources, sent_at);
    auto* received = runtime::scratch_at<std::byte>(resources, received_at);
    auto* input = static_cast<const std::byte*>(args.inputs[0].data);
    auto* output = static_cast<std::byte*>(args.outputs[0].data);
    const size_t e = shape.element, chunk = shape.chunk_elements() * e;
    const size_t w = static_cast<size_t>(shape.width) * e, full = static_cast<size_t>(shape.full_width) * e;
    const size_t slice = static_cast<size_t>(shape.local_tokens) * w;  // one row's T/N tokens of a head group
    const size_t rows = static_cast<size_t>(shape.batch * shape.local_tokens), batch = static_cast<size_t>(shape.batch);
    const size_t tokens_pitch = slice * static_cast<size_t>(shape.ranks);  // one row's T tokens of a head group
    for (int64_t peer = 0; peer < shape.ranks; ++peer) {
      const auto p = static_cast<size_t>(peer);
      if (to_heads) {
        CUDA_CHECK(cudaMemcpy2DAsync(sent + p * chunk, w, input + p * w, full, w, rows, cudaMemcpyDeviceToDevice, args.stream));
      } else {
        CUDA_CHECK(cudaMemcpy2DAsync(sent + p * chunk, slice, input + p * slice, tokens_pitch, slice, batch,
                                     cudaMemcpyDeviceToDevice, args.stream));
      }
    }
    slot->communicator->all_to_all(sent, received, shape.chunk_elements(), dtype);
    for (int64_t peer = 0; peer < shape.ranks; ++peer) {
      const auto p = static_cast<size_t>(peer);
      if (to_heads) {
        CUDA_CHECK(cudaMemcpy2DAsync(output + p * slice, tokens_pitch, received + p * chunk, slice, slice, batch,
                                     cudaMemcpyDeviceToDevice, args.stream));
      } else {
        CUDA_CHECK(cudaMemcpy2DAsync(output + p * w, full, received + p * chunk, w, w, rows, cudaMemcpyDeviceToDevice,
                                     args.stream));
      }
    }
  };
}

}  // namespace

void add_sequence_exchange_cuda_ops(runtime::CudaOpTable& table, const SequenceGroupSlot* slot) {
  table.add(kSequenceToHeads, [slot](const runtime::CudaBindContext& ctx) { return bind(ctx, slot, true); });
  table.add(kHeadsToSequence, [slot](const runtime::CudaBindContext& ctx) { return bind(ctx, slot, false); });
}

}  // namespace surogate::distributed
