// CUDA binders for `dequantize_nf4`, `dequantize_fp8_blocks` and `dequantize_fp4`
// (ops/defs/dequantize_*_def.cpp, models/qlora.h): a QLoRA base weight rebuilt in bf16 from its NF4,
// FP8 block or NVFP4 pieces before the matmul that reads it (cuda/kernels/dequantize_*.h).
#include "core/error.h"
#include "cuda/kernels/dequantize_fp4.h"
#include "cuda/kernels/dequantize_fp8_blocks.h"
#include "cuda/kernels/dequantize_nf4.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

CudaKernel bind_dequantize_nf4(const CudaBindContext& ctx) {
  if (ctx.outputs[0].dtype != DType::BF16) {
    fail_user("node '{}' (op dequantize_nf4): the CUDA backend writes BF16 weights, got {}", ctx.node.name,
              graph::format_type(ctx.outputs[0]));
  }
  const bool double_quant = ctx.inputs.size() == 4;
  const int64_t numel = ctx.outputs[0].numel();
  const int64_t block_size = ctx.attrs.integer("block_size");
  cuda::prepare_dequantize_nf4();
  return [=](const CudaKernelArgs& args) {
    cuda::Nf4DeviceView view;
    view.packed = args.inputs[0].as<const uint8_t>();
    if (double_quant) {
      view.absmax_codes = args.inputs[1].as<const uint8_t>();
      view.absmax2 = args.inputs[2].as<const float>();
      view.offset = args.inputs[3].as<const float>();
    } else {
      view.absmax = args.inputs[1].as<const float>();
    }
    view.numel = numel;
    view.block_size = block_size;
    cuda::dequantize_nf4_bf16(view, args.outputs[0].as<__nv_bfloat16>(), args.stream);
  };
}

CudaKernel bind_dequantize_fp8_blocks(const CudaBindContext& ctx) {
  if (ctx.outputs[0].dtype != DType::BF16) {
    fail_user("node '{}' (op dequantize_fp8_blocks): the CUDA backend writes BF16 weights, got {}", ctx.node.name,
              graph::format_type(ctx.outputs[0]));
  }
  const int64_t rows = ctx.outputs[0].shape[0], cols = ctx.outputs[0].shape[1];
  const int64_t block = ctx.attrs.integer("block_size");
  return [=](const CudaKernelArgs& args) {
    const cuda::Fp8BlockDeviceView view{args.inputs[0].as<const uint8_t>(), args.inputs[1].as<const float>(), rows,
                                        cols, block};
    cuda::dequantize_fp8_blocks_bf16(view, args.outputs[0].as<__nv_bfloat16>(), args.stream);
  };
}

CudaKernel bind_dequantize_fp4(const CudaBindContext& ctx) {
  if (ctx.outputs[0].dtype != DType::BF16) {
    fail_user("node '{}' (op dequantize_fp4): the CUDA backend writes BF16 weights, got {}", ctx.node.name,
              graph::format_type(ctx.outputs[0]));
  }
  const int64_t rows = ctx.outputs[0].shape[0], cols = ctx.outputs[0].shape[1];
  return [=](const CudaKernelArgs& args) {
    const cuda::Nvfp4DeviceView view{args.inputs[0].as<const uint8_t>(), args.inputs[1].as<const uint8_t>(),
                                     args.inputs[2].as<const float>(), rows, cols};
    cuda::dequantize_fp4_bf16(view, args.outputs[0].as<__nv_bfloat16>(), args.stream);
  };
}

}  // namespace

void register_quant_cuda_ops(CudaOpTable& table) {
  table.add("dequantize_nf4", bind_dequantize_nf4);
  table.add("dequantize_fp8_blocks", bind_dequantize_fp8_blocks);
  table.add("dequantize_fp4", bind_dequantize_fp4);
}

}  // namespace surogate::runtime
