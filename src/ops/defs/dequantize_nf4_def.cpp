// Graph op "dequantize_nf4": a frozen weight stored in NF4 (quant/nf4.h), rebuilt in the weight's
// dtype right before the matmul that reads it (models/qlora.h inserts it, recompute group
// "dequant": the planner never keeps the result, backward rebuilds it).
//   dequantize_nf4(packed U8 [ceil(n/2)], absmax F32 [blocks])                           plain
//   dequantize_nf4(packed, absmax_codes U8 [blocks], absmax2 F32 [ceil(blocks/256)],
//                  offset F32 [1])                                                      double quant
// attrs: shape (the weight's), block_size, dtype (the output's: F32 on the CPU, BF16 on the GPU).
// No gradient: the base weights of QLoRA are frozen (autodiff never asks for one).
#include <algorithm>
#include <vector>

#include "ops/defs/def_util.h"
#include "ops/parallel_for.h"
#include "quant/nf4.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

quant::Nf4Shape nf4_shape(const Attrs& attrs, size_t inputs) {
  quant::Nf4Shape shape;
  shape.numel = 1;
  for (int64_t dim : attrs.integers("shape")) shape.numel *= dim;
  shape.block_size = attrs.integer("block_size");
  if (shape.block_size < 2 || shape.block_size % 2 != 0) {
    fail_user("{}: dequantize_nf4 block_size {} must be even and at least 2", attrs.where(), shape.block_size);
  }
  shape.double_quant = inputs == 4;
  return shape;
}

CpuKernel bind_cpu(const CpuBindContext& ctx) {
  const quant::Nf4Shape shape = nf4_shape(ctx.attrs, ctx.inputs.size());
  if (ctx.outputs[0].dtype != DType::F32) {
    fail_user("node '{}' (op dequantize_nf4): the CPU backend writes F32, got {}", ctx.node.name,
              dtype_safetensors_name(ctx.outputs[0].dtype));
  }
  return [shape](const CpuKernelArgs& args) {
    quant::Nf4View view;
    view.shape = shape;
    view.packed = args.inputs[0].as<uint8_t>();
    if (shape.double_quant) {
      view.absmax_codes = args.inputs[1].as<uint8_t>();
      view.absmax2 = args.inputs[2].as<float>();
      view.offset = *args.inputs[3].as<float>();
    } else {
      view.absmax = args.inputs[1].as<float>();
    }
    float* out = args.outputs[0].as<float>();
    constexpr int64_t kBlocksPerTask = 256;
    const int64_t tasks = (shape.blocks() + kBlocksPerTask - 1) / kBlocksPerTask;
    parallel_for(tasks, [&](int64_t task) {
      const int64_t first = task * kBlocksPerTask;
      quant::dequantize_nf4_blocks(view, first, std::min(shape.blocks(), first + kBlocksPerTask), out);
    });
  };
}

}  // namespace

void register_dequantize_ops(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "dequantize_nf4",
      .inputs = {"packed", "absmax", "absmax2", "offset"},
      .outputs = {"weight"},
      .infer = [](const InferContext& ctx) {
        if (ctx.input_count() != 2 && ctx.input_count() != 4) {
          ctx.fail("takes 2 inputs (packed, absmax) or 4 (packed, absmax codes, absmax2, offset), got {}",
                   ctx.input_count());
        }
        const quant::Nf4Shape shape = nf4_shape(ctx.attrs, ctx.input_count());
        const std::vector<int64_t> dims = ctx.attrs.integers("shape");
        const auto dtype = dtype_from_safetensors_name(ctx.attrs.string("dtype"));
        if (!dtype || !dtype_is_floating(*dtype)) ctx.fail("attr dtype must name a floating dtype");
        ctx.expect_dtype(0, DType::U8);
        ctx.expect_rank(0, 1);
        ctx.expect_dim(0, 0, shape.packed_bytes());
        ctx.expect_dtype(1, shape.double_quant ? DType::U8 : DType::F32);
        ctx.expect_rank(1, 1);
        ctx.expect_dim(1, 0, shape.blocks());
        if (shape.double_quant) {
          ctx.expect_dtype(2, DType::F32);
          ctx.expect_rank(2, 1);
          ctx.expect_dim(2, 0, shape.absmax2_count());
          ctx.expect_dtype(3, DType::F32);
          ctx.expect_rank(3, 1);
          ctx.expect_dim(3, 0, 1);
        }
        return std::vector<TensorType>{TensorType{*dtype, Shape(dims.begin(), dims.end())}};
      },
      .gradient = {},
      .cpu = bind_cpu,
      .variadic_inputs = true,  // 2 or 4 (double quantization); the shape rule checks,
      // the same codes and scales, one bf16 rounding (test_dequantize_*_cuda.cpp, test_nvfp4_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 0.0, .bf16 = 4e-3},
  });
}

}  // namespace surogate::ops::defs
