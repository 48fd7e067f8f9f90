// transpose_fp8(codes [..., columns]) -> codes_t [columns, rows] (rows = the product of the other
// dimensions), the same FP8 dtype: a plain transpose of the bytes. models/fp8_fusion.h's
// share_fp8_input_transposes inserts one before sibling projections' weight gradients that read
// the same input codes (q / k / v, gate / up in full fine-tuning), which then take it with
// {x_transposed: true}: FP8 tensor-core products want the tokens contiguous, so each would
// otherwise transpose the same codes itself. No gradient (codes carry none). CUDA:
// runtime/cuda_fp8_ops.cpp (cuda::fp8_transpose).
#include "ops/defs/def_util.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

std::vector<TensorType> infer_transpose(const InferContext& ctx) {
  if (ctx.input_count() != 1) ctx.fail("transpose_fp8 takes the codes only");
  const DType dtype = ctx.input(0).dtype;
  if (dtype != DType::F8_E4M3 && dtype != DType::F8_E5M2) ctx.fail("{} must hold FP8 codes", ctx.input_label(0));
  if (ctx.input(0).shape.empty()) ctx.fail("{} must have at least one dimension", ctx.input_label(0));
  const int64_t columns = ctx.input(0).shape.back();
  return {{dtype, Shape{columns, columns == 0 ? 0 : ctx.input(0).numel() / columns}}};
}

CpuKernel bind_transpose(const CpuBindContext& ctx) {
  const int64_t columns = ctx.outputs[0].shape[0], rows = ctx.outputs[0].shape[1];
  return [=](const CpuKernelArgs& args) {
    const uint8_t* in = args.inputs[0].as<uint8_t>();
    uint8_t* out = args.outputs[0].as<uint8_t>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < columns; ++c) out[c * rows + r] = in[r * columns + c];
    }
  };
}

}  // namespace

void register_fp8_transpose_op(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "transpose_fp8",
      .inputs = {"codes"},
      .outputs = {"codes_t"},
      .infer = infer_transpose,
      .gradient = {},
      .cpu = bind_transpose,
      // y, d_x, d_w within 1e-2 (test_fp8_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 1e-2},
  });
}

}  // namespace surogate::ops::defs
