// Graph op "dequantize_fp8_blocks": a frozen weight stored in FP8 E4M3 with one scale per block of
// block_size × block_size (quant/fp8_blocks.h), rebuilt in the weight's dtype right before the
// matmul that reads it (models/qlora.h inserts it under qlora_fp8, recompute group "dequant").
//   dequantize_fp8_blocks(codes F8_E4M3 [rows, cols], scale_inv F32 [ceil(rows/b), ceil(cols/b)])
// attrs: block_size (b), dtype (the output's: F32 on the CPU, BF16 on the GPU). The output has the
// codes' shape. No gradient: the base weights of QLoRA are frozen.
#include <algorithm>
#include <vector>

#include "ops/defs/def_util.h"
#include "ops/parallel_for.h"
#include "quant/fp8_blocks.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

int64_t block_size(const Attrs& attrs) {
  const int64_t block = attrs.integer("block_size");
  if (block < 1) fail_user("{}: dequantize_fp8_blocks block_size {} must be positive", attrs.where(), block);
  return block;
}

CpuKernel bind_cpu(const CpuBindContext& ctx) {
  if (ctx.outputs[0].dtype != DType::F32) {
    fail_user("node '{}' (op dequantize_fp8_blocks): the CPU backend writes F32, got {}", ctx.node.name,
              dtype_safetensors_name(ctx.outputs[0].dtype));
  }
  const int64_t block = block_size(ctx.attrs);
  const quant::Fp8BlockShape shape{ctx.inputs[0].shape[0], ctx.inputs[0].shape[1], block, block};
  return [shape](const CpuKernelArgs& args) {
    const auto* codes = args.inputs[0].as<uint8_t>();
    const float* scale_inv = args.inputs[1].as<float>();
    float* out = args.outputs[0].as<float>();
    parallel_for(shape.row_blocks(), [&](int64_t block_row) {
      quant::dequantize_fp8_blocks(codes, scale_inv, shape, block_row, block_row + 1, out);
    });
  };
}

}  // namespace

void register_dequantize_fp8_blocks_ops(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "dequantize_fp8_blocks",
      .inputs = {"codes", "scale_inv"},
      .outputs = {"weight"},
      .infer = [](const InferContext& ctx) {
        const int64_t block = block_size(ctx.attrs);
        const auto dtype = dtype_from_safetensors_name(ctx.attrs.string("dtype"));
        if (!dtype || !dtype_is_floating(*dtype)) ctx.fail("attr dtype must name a floating dtype");
        ctx.expect_dtype(0, DType::F8_E4M3);
        ctx.expect_rank(0, 2);
        ctx.expect_dtype(1, DType::F32);
        ctx.expect_rank(1, 2);
        const Shape& shape = ctx.input(0).shape;
        ctx.expect_dim(1, 0, (shape[0] + block - 1) / block);
        ctx.expect_dim(1, 1, (shape[1] + block - 1) / block);
        return std::vector<TensorType>{TensorType{*dtype, shape}};
      },
      .gradient = {},
      .cpu = bind_cpu,
      // the same codes and scales, one bf16 rounding (test_dequantize_*_cuda.cpp, test_nvfp4_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 0.0, .bf16 = 4e-3},
  });
}

}  // namespace surogate::ops::defs
