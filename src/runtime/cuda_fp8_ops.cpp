// CUDA binders of the fp8_hybrid recipe's ops (ops/defs/fp8_linear_def.cpp, models/fp8_recipe.h):
//   quantize_fp8               fp8_record_amax + fp8_quantize (cuda/kernels/fp8_quantize.h) with the
//                              site's state row, or two zeroed scratch floats (current scaling);
//   linear_fp8                 one cuBLASLt FP8 product (cuda/fp8_matmul.h): xq · wᵀ with both
//                              scale pointers, bias as the epilogue or the addend as C; fast
//                              accumulation, as forward products commonly run;
//   linear_fp8_backward_input  d_out quantized into scratch (the gradient format, the site's row),
//                              then d_q · w_tᵀ [+ addend], full fp32 accumulation.
#include "core/error.h"
#include "cuda/kernels/fp8_quantize.h"
#include "runtime/cuda_bind_checks.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

using bf16 = __nv_bfloat16;

cuda::Fp8Target target_named(const std::string& name) {
  return name == "e4m3" ? cuda::Fp8Target::E4M3 : cuda::Fp8Target::E5M2;
}

int64_t row_offset(const CudaBindContext& ctx, size_t state_input, const std::string& site_attr) {
  return ctx.attrs.integer(site_attr) * ctx.inputs[state_input].shape[1];
}

CudaKernel bind_quantize(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  const int64_t n = ctx.inputs[0].numel();
  const cuda::Fp8Target format = target_named(ctx.attrs.string("format"));
  const bool has_state = ctx.inputs.size() == 2;
  const int64_t offset = has_state ? row_offset(ctx, 1, "site") : 0;
  ScratchLayout scratch;
  const size_t row_scratch = has_state ? 0 : scratch.take(2 * sizeof(float));
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    float* row;
    if (has_state) {
      row = args.inputs[1].as<float>() + offset;
    } else {
      row = scratch_at<float>(resources, row_scratch);
      CUDA_CHECK(cudaMemsetAsync(row, 0, 2 * sizeof(float), args.stream));
    }
    const bf16* x = args.inputs[0].as<const bf16>();
    cuda::fp8_record_amax(x, n, row, args.stream);
    cuda::fp8_quantize(x, n, format, row, args.outputs[0].as<uint8_t>(), args.outputs[1].as<float>(), args.stream);
  };
}

CudaKernel bind_linear(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  const std::string extra = ctx.attrs.string_or("extra", "");
  const int64_t out = ctx.inputs[3].shape[0], in = ctx.inputs[3].shape[1], rows = ctx.inputs[1].numel() / in;
  const cuda::Fp8MatmulShape shape{.m = rows, .n = out, .k = in, .a_format = cuda::Fp8Operand::E4M3,
                                   .has_bias = extra == "bias", .has_addend = extra == "addend",
                                   .fast_accumulation = true};
  CudaResources* resources = &ctx.resources;
  resources->fp8_matmul();
  return [=](const CudaKernelArgs& args) {
    const bf16* extra_tensor = shape.has_bias || shape.has_addend ? args.inputs[6].as<const bf16>() : nullptr;
    resources->fp8_matmul().run(shape, args.outputs[0].as<bf16>(), args.inputs[1].data, args.inputs[2].as<const float>(),
                                args.inputs[3].data, args.inputs[5].as<const float>(),
                                shape.has_bias ? extra_tensor : nullptr, shape.has_addend ? extra_tensor : nullptr,
                                args.stream);
  };
}

CudaKernel bind_backward_input(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  const int64_t in = ctx.inputs[1].shape[0], out = ctx.inputs[1].shape[1], rows = ctx.inputs[0].numel() / out;
  const cuda::Fp8Target format = target_named(ctx.attrs.string("format"));
  const int64_t offset = row_offset(ctx, 3, "site");
  const bool has_addend = ctx.inputs.size() == 5;
  ScratchLayout scratch;
  const size_t codes = scratch.take(static_cast<size_t>(rows * out));
  const size_t scale = scratch.take(sizeof(float));
  ctx.resources.reserve_scratch(scratch.bytes);
  const cuda::Fp8MatmulShape shape{.m = rows, .n = in, .k = out,
                                   .a_format = format == cuda::Fp8Target::E4M3 ? cuda::Fp8Operand::E4M3
                                                                               : cuda::Fp8Operand::E5M2,
                                   .has_addend = has_addend};
  CudaResources* resources = &ctx.resources;
  resources->fp8_matmul();
  return [=](const CudaKernelArgs& args) {
    float* row = args.inputs[3].as<float>() + offset;
    const bf16* d_out = args.inputs[0].as<const bf16>();
    uint8_t* d_codes = scratch_at<uint8_t>(resources, codes);
    float* d_scale_inv = scratch_at<float>(resources, scale);
    cuda::fp8_record_amax(d_out, rows * out, row, args.stream);
    cuda::fp8_quantize(d_out, rows * out, format, row, d_codes, d_scale_inv, args.stream);
    resources->fp8_matmul().run(shape, args.outputs[0].as<bf16>(), d_codes, d_scale_inv, args.inputs[1].data,
                                args.inputs[2].as<const float>(), nullptr,
                                has_addend ? args.inputs[4].as<const bf16>() : nullptr, args.stream);
  };
}

}  // namespace

void register_fp8_cuda_ops(CudaOpTable& table) {
  table.add("quantize_fp8", bind_quantize);
  table.add("linear_fp8", bind_linear);
  table.add("linear_fp8_backward_input", bind_backward_input);
}

}  // namespace surogate::runtime
