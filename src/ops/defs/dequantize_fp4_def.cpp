// Graph op "dequantize_fp4": a frozen weight stored in NVFP4 (quant/nvfp4.h: E2M1 codes, one E4M3
// scale per 16 values of a row, one fp32 tensor scale), rebuilt in the weight's dtype right before
// the matmul that reads it (models/qlora.h inserts it under qlora_fp4, recompute group "dequant").
//   dequantize_fp4(packed U8 [rows, ceil(cols/2)], block_scales F8_E4M3 [rows, ceil(cols/16)],
//                  tensor_scale F32 [1])
// attrs: shape ([rows, cols], the weight's), dtype (the output's: F32 on the CPU, BF16 on the GPU).
// Four Over Six needs nothing here: the block's choice lives in its scale. No gradient: the base
// weights of QLoRA are frozen.
#include <algorithm>
#include <vector>

#include "ops/defs/def_util.h"
#include "ops/parallel_for.h"
#include "quant/nvfp4.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

quant::Nvfp4Shape nvfp4_shape(const Attrs& attrs) {
  const std::vector<int64_t> dims = attrs.integers("shape");
  if (dims.size() != 2 || dims[0] < 1 || dims[1] < 1) {
    fail_user("{}: dequantize_fp4 shape must be two positive sizes [rows, cols]", attrs.where());
  }
  return {dims[0], dims[1]};
}

CpuKernel bind_cpu(const CpuBindContext& ctx) {
  if (ctx.outputs[0].dtype != DType::F32) {
    fail_user("node '{}' (op dequantize_fp4): the CPU backend writes F32, got {}", ctx.node.name,
              dtype_safetensors_name(ctx.outputs[0].dtype));
  }
  const quant::Nvfp4Shape shape = nvfp4_shape(ctx.attrs);
  return [shape](const CpuKernelArgs& args) {
    const auto* packed = args.inputs[0].as<uint8_t>();
    const auto* block_scales = args.inputs[1].as<uint8_t>();
    const float decode = *args.inputs[2].as<float>();
    float* out = args.outputs[0].as<float>();
    constexpr int64_t kRowsPerTask = 16;
    parallel_for((shape.rows + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t task) {
      const int64_t first = task * kRowsPerTask;
      const int64_t end = std::min(shape.rows, first + kRowsPerTask);
      quant::dequantize_nvfp4_rows(packed, block_scales, decode, shape, first, end, out);
    });
  };
}

}  // namespace

void register_dequantize_fp4_ops(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "dequantize_fp4",
      .inputs = {"packed", "block_scales", "tensor_scale"},
      .outputs = {"weight"},
      .infer = [](const InferContext& ctx) {
        const quant::Nvfp4Shape shape = nvfp4_shape(ctx.attrs);
        const auto dtype = dtype_from_safetensors_name(ctx.attrs.string("dtype"));
        if (!dtype || !dtype_is_floating(*dtype)) ctx.fail("attr dtype must name a floating dtype");
        ctx.expect_dtype(0, DType::U8);
        ctx.expect_rank(0, 2);
        ctx.expect_dim(0, 0, shape.rows);
        ctx.expect_dim(0, 1, shape.packed_cols());
        ctx.expect_dtype(1, DType::F8_E4M3);
        ctx.expect_rank(1, 2);
        ctx.expect_dim(1, 0, shape.rows);
        ctx.expect_dim(1, 1, shape.scale_cols());
        ctx.expect_dtype(2, DType::F32);
        ctx.expect_rank(2, 1);
        ctx.expect_dim(2, 0, 1);
        return std::vector<TensorType>{TensorType{*dtype, Shape{shape.rows, shape.cols}}};
      },
      .gradient = {},
      .cpu = bind_cpu,
      // the same codes and scales, one bf16 rounding (test_dequantize_*_cuda.cpp, test_nvfp4_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 0.0, .bf16 = 4e-3},
  });
}

}  // namespace surogate::ops::defs
