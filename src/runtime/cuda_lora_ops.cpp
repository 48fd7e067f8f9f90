// CUDA binder for `dropout` (ops/defs/dropout_def.cpp), the one op of the LoRA rewrite
// (models/lora.h) that is not a core or decoder op; bf16 (BF16 graphs) and fp32. The mask is the
// CPU op's function of (seed, stream, element index), so a CUDA run drops exactly the elements
// the CPU reference drops (runtime/cuda_lora_kernels.h); the backward is the same op on d_out.
// (`scale`, which the rewrite also emits, is a core op: runtime/cuda_core_ops.cpp.)
#include "core/error.h"
#include "runtime/cuda_lora_kernels.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

namespace k = cuda_kernels;

CudaKernel bind_dropout(const CudaBindContext& ctx) {
  const DType dtype = ctx.inputs[0].dtype;
  if (ctx.inputs[1].dtype != DType::I32 || ctx.outputs[0].dtype != dtype ||
      (dtype != DType::BF16 && dtype != DType::F32)) {
    fail_user("node '{}' (op dropout): the CUDA backend runs dropout on BF16 or F32 tensors with an I32 seed, got {} "
              "and seed {}", ctx.node.name, graph::format_type(ctx.inputs[0]), graph::format_type(ctx.inputs[1]));
  }
  const double p = ctx.attrs.number("p");
  if (!(p >= 0.0 && p < 1.0)) fail_user("node '{}' (op dropout): attr p = {} must be in [0, 1)", ctx.node.name, p);
  const auto stream_id = static_cast<uint64_t>(ctx.attrs.integer("stream"));
  const int64_t count = ctx.outputs[0].numel();
  if (dtype == DType::BF16) {
    return [=](const CudaKernelArgs& args) {
      k::dropout_bf16(args.inputs[0].as<const __nv_bfloat16>(), args.inputs[1].as<const int32_t>(), stream_id, p,
                      args.outputs[0].as<__nv_bfloat16>(), count, args.stream);
    };
  }
  return [=](const CudaKernelArgs& args) {
    k::dropout_f32(args.inputs[0].as<const float>(), args.inputs[1].as<const int32_t>(), stream_id, p,
                   args.outputs[0].as<float>(), count, args.stream);
  };
}

}  // namespace

void register_lora_cuda_ops(CudaOpTable& table) { table.add("dropout", bind_dropout); }

}  // namespace surogate::runtime
