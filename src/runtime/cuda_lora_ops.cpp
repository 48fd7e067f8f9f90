// CUDA binders for the ops of the LoRA rewrite (models/lora.h) that are not core or decoder ops:
//  * `dropout` and `dropout_add` (ops/defs/dropout_def.cpp), bf16 / fp16 (BF16 / F16 graphs) and fp32. The mask
//    is the CPU op's function of (seed, stream, element index), so a CUDA run drops exactly the
//    elements the CPU reference drops (cuda/kernels/dropout.h); the backward is the same op on
//    d_out, dropout_add when it folds the input's pending gradient sum.
//  * `concat` / `split` (ops/defs/concat_split_def.cpp), any dtype: one launch per 8 pieces
//    (cuda/kernels/piece_copy.h; rows of `outer`, each piece a contiguous run of size · inner
//    elements), so a piece lands byte for byte where the CPU kernel puts it.
//  * `reshape` (ops/defs/reshape_def.cpp), any dtype: one device-to-device copy of the bytes.
// (`scale`, which F32 graphs' rewrite also emits, is a core op: runtime/cuda_core_ops.cpp.)
#include <algorithm>
#include <span>
#include <vector>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels/dropout.h"
#include "cuda/kernels/piece_copy.h"
#include "runtime/cuda_bind_checks.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

namespace k = cuda;

// dropout (x, seed) and dropout_add (x, seed, addend): the addend, when present, is input 2.
CudaKernel bind_dropout(const CudaBindContext& ctx) {
  const DType dtype = ctx.inputs[0].dtype;
  const bool with_addend = ctx.inputs.size() == 3;
  if (ctx.inputs[1].dtype != DType::I32 || ctx.outputs[0].dtype != dtype ||
      (with_addend && ctx.inputs[2].dtype != dtype) ||
      (dtype != DType::BF16 && dtype != DType::F16 && dtype != DType::F32)) {
    fail_user("node '{}' (op {}): the CUDA backend runs dropout on BF16, F16 or F32 tensors with an I32 seed, got {} "
              "and seed {}", ctx.node.name, ctx.node.op, graph::format_type(ctx.inputs[0]),
              graph::format_type(ctx.inputs[1]));
  }
  const double p = ctx.attrs.number("p");
  if (!(p >= 0.0 && p < 1.0)) fail_user("node '{}' (op dropout): attr p = {} must be in [0, 1)", ctx.node.name, p);
  const auto stream_id = static_cast<uint64_t>(ctx.attrs.integer("stream"));
  const int64_t count = ctx.outputs[0].numel();
  if (dtype != DType::F32) {
    return by_element_type(dtype, [&]<typename T>() -> CudaKernel {
      return [=](const CudaKernelArgs& args) {
        k::dropout_16bit(args.inputs[0].as<const T>(), args.inputs[1].as<const int32_t>(), stream_id, p,
                         args.outputs[0].as<T>(), count, args.stream,
                         with_addend ? args.inputs[2].as<const T>() : nullptr);
      };
    });
  }
  return [=](const CudaKernelArgs& args) {
    k::dropout_f32(args.inputs[0].as<const float>(), args.inputs[1].as<const int32_t>(), stream_id, p,
                   args.outputs[0].as<float>(), count, args.stream,
                   with_addend ? args.inputs[2].as<const float>() : nullptr);
  };
}

// Where the pieces of a concat / split sit in the joined tensor, in bytes.
struct PieceLayout {
  size_t outer = 1;                // rows: the product of the dimensions before the axis
  size_t joined_row = 0;           // bytes of one row of the joined tensor
  std::vector<size_t> offsets;     // of each piece within a row
  std::vector<size_t> widths;      // bytes of each piece's row
};

PieceLayout piece_layout(const CudaBindContext& ctx, const graph::TensorType& joined,
                         std::span<const graph::TensorType> pieces) {
  const int64_t axis_attr = ctx.attrs.integer("axis");
  const size_t rank = joined.shape.size();
  const size_t axis = static_cast<size_t>(axis_attr < 0 ? axis_attr + static_cast<int64_t>(rank) : axis_attr);
  const size_t element = dtype_size_bytes(joined.dtype);
  size_t inner = 1;
  PieceLayout layout;
  for (size_t d = 0; d < axis; ++d) layout.outer *= static_cast<size_t>(joined.shape[d]);
  for (size_t d = axis + 1; d < rank; ++d) inner *= static_cast<size_t>(joined.shape[d]);
  layout.joined_row = static_cast<size_t>(joined.shape[axis]) * inner * element;
  size_t offset = 0;
  for (const graph::TensorType& piece : pieces) {
    layout.offsets.push_back(offset);
    layout.widths.push_back(static_cast<size_t>(piece.shape[axis]) * inner * element);
    offset += layout.widths.back();
  }
  return layout;
}

// Moves every piece of a concat (into_joined) or split, up to PieceCopy::kMaxPieces per launch.
void copy_all_pieces(const PieceLayout& layout, void* joined, std::span<const CudaTensorView> pieces, bool into_joined,
                     cudaStream_t stream) {
  for (size_t first = 0; first < pieces.size(); first += k::PieceCopy::kMaxPieces) {
    const size_t count = std::min<size_t>(k::PieceCopy::kMaxPieces, pieces.size() - first);
    k::PieceCopy copy;
    copy.pieces = static_cast<int>(count);
    copy.outer = static_cast<int64_t>(layout.outer);
    copy.joined_row = static_cast<int64_t>(layout.joined_row);
    copy.joined = joined;
    for (size_t p = 0; p < count; ++p) {
      copy.piece_data[p] = pieces[first + p].data;
      copy.offsets[p] = static_cast<int64_t>(layout.offsets[first + p]);
    }
    copy.offsets[count] = static_cast<int64_t>(layout.offsets[first + count - 1] + layout.widths[first + count - 1]);
    k::copy_pieces(copy, into_joined, stream);
  }
}

CudaKernel bind_concat(const CudaBindContext& ctx) {
  const PieceLayout layout = piece_layout(ctx, ctx.outputs[0], ctx.inputs);
  return [layout](const CudaKernelArgs& args) {
    copy_all_pieces(layout, args.outputs[0].data, args.inputs, true, args.stream);
  };
}

CudaKernel bind_split(const CudaBindContext& ctx) {
  const PieceLayout layout = piece_layout(ctx, ctx.inputs[0], ctx.outputs);
  return [layout](const CudaKernelArgs& args) {
    copy_all_pieces(layout, args.inputs[0].data, args.outputs, false, args.stream);
  };
}

CudaKernel bind_reshape(const CudaBindContext& ctx) {
  const size_t bytes = static_cast<size_t>(ctx.inputs[0].numel()) * dtype_size_bytes(ctx.inputs[0].dtype);
  return [bytes](const CudaKernelArgs& args) {
    if (args.outputs[0].data == args.inputs[0].data) return;
    CUDA_CHECK(cudaMemcpyAsync(args.outputs[0].data, args.inputs[0].data, bytes, cudaMemcpyDeviceToDevice, args.stream));
  };
}

}  // namespace

void register_lora_cuda_ops(CudaOpTable& table) {
  table.add("dropout", bind_dropout);
  table.add("dropout_add", bind_dropout);
  table.add("concat", bind_concat);
  table.add("split", bind_split);
  table.add("reshape", bind_reshape);
}

}  // namespace surogate::runtime
