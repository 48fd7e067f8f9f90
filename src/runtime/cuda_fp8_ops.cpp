// CUDA binders of the fp8_hybrid recipe's ops (ops/defs/fp8_linear_def.cpp, models/fp8_recipe.h):
//   quantize_fp8               fp8_record_amax + fp8_quantize (cuda/kernels/fp8_quantize.h) with the
//                              site's state row, or two zeroed scratch floats (current scaling);
//   quantize_fp8_weight        fp8_quantize_weight: the codes, their transpose and scale_inv;
//   linear_fp8                 one cuBLASLt FP8 product (cuda/fp8_matmul.h): xq · wᵀ with both
//                              scale pointers, bias as the epilogue or the addend as C; fast
//                              accumulation, as forward products commonly run;
//   linear_fp8_backward_input  d_out quantized into scratch (the gradient format, the site's row),
//                              then d_q · w_tᵀ [+ addend], full fp32 accumulation;
//   linear_fp8_backward_input_quantized  that product from the codes swiglu_backward_fp8 wrote;
//   linear_fp8_backward_quantized(_accumulate)  both products of linear_fp8_backward from those codes;
//   linear_fp8_backward(_accumulate)  linear_fp8_backward_input, then d_q and xq transposed into scratch (K = the
//                              tokens must be the contiguous dimension) and d_qᵀ · xqᵀᵀ into
//                              d_weight (beta = 1 for the accumulating form), full accumulation;
//                              {x_transposed}: xq is already [in, rows];
//   transpose_fp8              fp8_transpose (an input's codes shared by sibling projections);
//   rmsnorm_fp8, fused_residual_rmsnorm_fp8, swiglu_fp8, swiglu_backward_fp8,
//   fused_residual_rmsnorm_backward_fp8  the producer's
//                              kernel with the FP8 epilogue (cuda/kernels/fp8_epilogue.cuh), then
//                              fp8_quantize_pending (a site with no delayed amax yet).
#include "core/error.h"
#include "cuda/kernels/elementwise_16bit.h"
#include "cuda/kernels/fp8_quantize.h"
#include "cuda/kernels/rmsnorm.h"
#include "cuda/kernels/swiglu.h"
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

// One tensor quantized with a site's row (or, without a state, a zeroed scratch row): its own amax
// into zeroed scratch when the row has no delayed amax, then the codes (quant/fp8_scaling.h).
struct SiteQuantizer {
  int64_t n = 0;
  cuda::Fp8Target format = cuda::Fp8Target::E4M3;
  size_t scratch = 0;  // two floats: [scratch row[0], amax] — row[0] read only without a state

  SiteQuantizer(ScratchLayout& layout, int64_t count, cuda::Fp8Target target)
      : n(count), format(target), scratch(layout.take(2 * sizeof(float))) {}
  // row: the site's row, or nullptr for current scaling. delayed_known (the host read row[0] > 0):
  // the quantize pass scales by row[0] and reads no amax, so neither the scratch zeroing nor the
  // amax pass (which would return at once) is launched.
  void run(CudaResources* resources, const bf16* x, float* row, uint8_t* q, float* scale_inv, cudaStream_t stream,
           bool delayed_known = false) const {
    float* floats = scratch_at<float>(resources, scratch);
    if (row == nullptr || !delayed_known) {
      CUDA_CHECK(cudaMemsetAsync(floats, 0, 2 * sizeof(float), stream));
      if (row == nullptr) row = floats;  // row[0] = 0; row[1] is the amax itself (recording it again is harmless)
      cuda::fp8_record_amax(x, n, row, floats + 1, stream);
    }
    cuda::fp8_quantize(x, n, format, row, floats + 1, q, scale_inv, stream);
  }
};

CudaKernel bind_quantize(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  const bool has_state = ctx.inputs.size() == 2;
  const int64_t offset = has_state ? row_offset(ctx, 1, "site") : 0;
  const int64_t site = has_state ? ctx.attrs.integer("site") : -1;
  ScratchLayout scratch;
  const SiteQuantizer quantizer(scratch, ctx.inputs[0].numel(), target_named(ctx.attrs.string("format")));
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    float* row = has_state ? args.inputs[1].as<float>() + offset : nullptr;
    quantizer.run(resources, args.inputs[0].as<const bf16>(), row, args.outputs[0].as<uint8_t>(),
                  args.outputs[1].as<float>(), args.stream, resources->fp8_delayed(site));
  };
}

CudaKernel bind_quantize_weight(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  const int64_t rows = ctx.inputs[0].shape[0], columns = ctx.inputs[0].shape[1];
  ScratchLayout scratch;
  const size_t amax = scratch.take(sizeof(float));
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    cuda::fp8_quantize_weight(args.inputs[0].as<const bf16>(), rows, columns, scratch_at<float>(resources, amax),
                              args.outputs[0].as<uint8_t>(), args.outputs[1].as<uint8_t>(), args.outputs[2].as<float>(),
                              args.stream);
  };
}

CudaKernel bind_linear_fp8(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  const std::string extra = ctx.attrs.string_or("extra", "");
  const int64_t out = ctx.inputs[3].shape[0], in = ctx.inputs[3].shape[1], rows = ctx.inputs[1].numel() / in;
  require(ctx, in % 16 == 0 && out % 16 == 0,
          "fp8_hybrid's FP8 products (cuBLASLt) take projections whose in and out features are multiples of 16, "
          "this one is [{}, {}]: set recipe: bf16 for this model", out, in);
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

cuda::Fp8Operand operand_of(cuda::Fp8Target format) {
  return format == cuda::Fp8Target::E4M3 ? cuda::Fp8Operand::E4M3 : cuda::Fp8Operand::E5M2;
}

// The input gradient of both backward ops: d_out quantized into scratch with the site's row, then
// d_q · w_tᵀ [+ addend] into d_x. Inputs by index: d_out, w_t, w_scale_inv, state, addend.
struct InputGradient {
  int64_t rows = 0, in = 0, out = 0, offset = 0, site = 0;
  SiteQuantizer quantizer;
  size_t codes = 0, scale = 0;
  cuda::Fp8MatmulShape shape;

  InputGradient(const CudaBindContext& ctx, ScratchLayout& scratch, size_t w_t, size_t state, bool has_addend)
      : rows(ctx.inputs[0].numel() / ctx.inputs[w_t].shape[1]), in(ctx.inputs[w_t].shape[0]),
        out(ctx.inputs[w_t].shape[1]), offset(row_offset(ctx, state, "site")), site(ctx.attrs.integer("site")),
        quantizer(scratch, rows * out, target_named(ctx.attrs.string("format"))),
        codes(scratch.take(static_cast<size_t>(rows * out))), scale(scratch.take(sizeof(float))),
        shape{.m = rows, .n = in, .k = out, .a_format = operand_of(quantizer.format), .has_addend = has_addend} {}

  void run(CudaResources* resources, const CudaKernelArgs& args, size_t w_t, size_t w_scale_inv, size_t state,
           const bf16* addend) const {
    float* row = args.inputs[state].as<float>() + offset;
    quantizer.run(resources, args.inputs[0].as<const bf16>(), row, scratch_at<uint8_t>(resources, codes),
                  scratch_at<float>(resources, scale), args.stream, resources->fp8_delayed(site));
    resources->fp8_matmul().run(shape, args.outputs[0].as<bf16>(), scratch_at<uint8_t>(resources, codes),
                                scratch_at<float>(resources, scale), args.inputs[w_t].data,
                                args.inputs[w_scale_inv].as<const float>(), nullptr, addend, args.stream);
  }
};

CudaKernel bind_backward_input(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  const bool has_addend = ctx.inputs.size() == 5;
  ScratchLayout scratch;
  const InputGradient input(ctx, scratch, 1, 3, has_addend);
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  resources->fp8_matmul();
  return [=](const CudaKernelArgs& args) {
    input.run(resources, args, 1, 2, 3, has_addend ? args.inputs[4].as<const bf16>() : nullptr);
  };
}

// The weight gradient of a trained projection from its gradient's codes (FP8 tensor-core
// products take both operands K-major, so the tokens must be contiguous): d_q and xq transposed
// into scratch, then d_qᵀ · xqᵀᵀ into d_weight (beta = 1 when accumulating), full accumulation.
// With {x_transposed} xq already is [in, rows] (a shared transpose_fp8). One launch per transpose:
// a launch over both (a job table in the kernel's parameters) moved the bytes 2.2× slower (H200).
struct WeightGradient {
  int64_t rows = 0, in = 0, out = 0;
  bool x_transposed = false;
  size_t codes_t = 0, x_t = 0;
  cuda::Fp8MatmulShape shape;

  WeightGradient(const CudaBindContext& ctx, ScratchLayout& scratch, int64_t rows_, int64_t in_, int64_t out_,
                 cuda::Fp8Operand d_format, bool accumulate)
      : rows(rows_), in(in_), out(out_), x_transposed(ctx.attrs.boolean_or("x_transposed", false)),
        codes_t(scratch.take(static_cast<size_t>(rows * out))),
        x_t(x_transposed ? 0 : scratch.take(static_cast<size_t>(rows * in))),
        shape{.m = out, .n = in, .k = rows, .a_format = d_format, .accumulate = accumulate} {
    require(ctx, rows % 16 == 0,
            "fp8_hybrid's weight gradient is an FP8 product over the micro-batch's tokens, which cuBLASLt takes in "
            "multiples of 16; this micro-batch has {}: make micro_batch_size × sequence_len a multiple of 16", rows);
  }
  void run(CudaResources* resources, const void* d_codes, const float* d_scale_inv, const void* x_codes,
           const float* x_scale_inv, bf16* d_weight, cudaStream_t stream) const {
    uint8_t* d_codes_t = scratch_at<uint8_t>(resources, codes_t);
    cuda::fp8_transpose(static_cast<const uint8_t*>(d_codes), rows, out, d_codes_t, stream);
    const void* x_codes_t = x_codes;
    if (!x_transposed) {
      uint8_t* x_scratch = scratch_at<uint8_t>(resources, x_t);
      cuda::fp8_transpose(static_cast<const uint8_t*>(x_codes), rows, in, x_scratch, stream);
      x_codes_t = x_scratch;
    }
    resources->fp8_matmul().run(shape, d_weight, d_codes_t, d_scale_inv, x_codes_t, x_scale_inv, nullptr, nullptr,
                                stream);
  }
};

// d_out, xq, x_scale_inv, w_t, w_scale_inv, state [, addend] -> d_x, d_weight.
CudaKernel bind_backward(const CudaBindContext& ctx, bool accumulate) {
  expect_in(ctx, 0, DType::BF16);
  expect_out(ctx, 1, DType::BF16);
  const bool has_addend = ctx.inputs.size() == 7;
  ScratchLayout scratch;
  const InputGradient input(ctx, scratch, 3, 5, has_addend);
  const WeightGradient weight(ctx, scratch, input.rows, input.in, input.out, input.shape.a_format, accumulate);
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  resources->fp8_matmul();
  return [=](const CudaKernelArgs& args) {
    input.run(resources, args, 3, 4, 5, has_addend ? args.inputs[6].as<const bf16>() : nullptr);
    weight.run(resources, scratch_at<const uint8_t>(resources, input.codes), scratch_at<const float>(resources, input.scale),
               args.inputs[1].data, args.inputs[2].as<const float>(), args.outputs[1].as<bf16>(), args.stream);
  };
}

// linear_fp8_backward_quantized(_accumulate) (d_out, d_q, d_scale_inv, xq, x_scale_inv, w_t, w_scale_inv
// [, addend]){format} -> d_x, d_weight: both products from the codes d_out's producer wrote.
CudaKernel bind_backward_quantized(const CudaBindContext& ctx, bool accumulate) {
  expect_in(ctx, 0, DType::BF16);
  expect_out(ctx, 1, DType::BF16);
  const bool has_addend = ctx.inputs.size() == 8;
  const int64_t in = ctx.inputs[5].shape[0], out = ctx.inputs[5].shape[1], rows = ctx.inputs[0].numel() / out;
  const cuda::Fp8Operand format = operand_of(target_named(ctx.attrs.string("format")));
  const cuda::Fp8MatmulShape input_shape{.m = rows, .n = in, .k = out, .a_format = format, .has_addend = has_addend};
  ScratchLayout scratch;
  const WeightGradient weight(ctx, scratch, rows, in, out, format, accumulate);
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  resources->fp8_matmul();
  return [=](const CudaKernelArgs& args) {
    resources->fp8_matmul().run(input_shape, args.outputs[0].as<bf16>(), args.inputs[1].data,
                                args.inputs[2].as<const float>(), args.inputs[5].data, args.inputs[6].as<const float>(),
                                nullptr, has_addend ? args.inputs[7].as<const bf16>() : nullptr, args.stream);
    weight.run(resources, args.inputs[1].data, args.inputs[2].as<const float>(), args.inputs[3].data,
               args.inputs[4].as<const float>(), args.outputs[1].as<bf16>(), args.stream);
  };
}

// ---- the producers that quantize their own output (ops/defs/fp8_output_def.cpp) ----

// The Fp8Output of a "_fp8" producer: the state is its last input, q and scale_inv its last two
// outputs; one float of scratch for the amax of a site with no delayed amax yet, zeroed per call
// unless the host knows the site has one (CudaResources::fp8_delayed: then no pending pass either).
// The format is E4M3 (an input), or the node's `format` (a gradient).
struct ProducerSite {
  size_t state_input = 0, q_output = 0, amax = 0;
  int64_t offset = 0, site = 0;
  cuda::Fp8Target format = cuda::Fp8Target::E4M3;

  ProducerSite(const CudaBindContext& ctx, ScratchLayout& layout)
      : state_input(ctx.inputs.size() - 1), q_output(ctx.outputs.size() - 2), amax(layout.take(sizeof(float))),
        offset(row_offset(ctx, ctx.inputs.size() - 1, "site")), site(ctx.attrs.integer("site")),
        format(target_named(ctx.attrs.string_or("format", "e4m3"))) {
    expect_in(ctx, 0, DType::BF16);
  }
  cuda::Fp8Output at(CudaResources* resources, const CudaKernelArgs& args) const {
    float* scratch = scratch_at<float>(resources, amax);
    const bool delayed = resources->fp8_delayed(site);
    if (!delayed) CUDA_CHECK(cudaMemsetAsync(scratch, 0, sizeof(float), args.stream));
    return {args.inputs[state_input].as<float>() + offset, scratch, args.outputs[q_output].as<uint8_t>(),
            args.outputs[q_output + 1].as<float>(), format, delayed};
  }
};

// A producer's bf16 output that no step reads (CudaBindContext::outputs_read: full fine-tuning's
// projections read the codes, OpDef::unread_inputs) is passed as null once the host knows the
// site's delayed amax (Fp8Output::needs_bf16): ~150 MB of writes fewer per Qwen3-1.7B layer and
// micro-batch of 4,096 tokens.

// rmsnorm_fp8 (x, weight, state) and fused_residual_rmsnorm_fp8 (residual_in, x, weight, state):
// the block-per-row kernel only (a hidden-size norm; per-head norms are not projection inputs).
CudaKernel bind_rmsnorm_fp8(const CudaBindContext& ctx, bool residual) {
  const size_t weight = residual ? 2 : 1;
  const int64_t channels = ctx.inputs[weight].shape[0], rows = ctx.inputs[0].numel() / channels;
  require(ctx, last(ctx.inputs[0]) == channels && channels % 8 == 0 && channels <= 32768,
          "the FP8 rmsnorm normalises whole rows of a multiple of 8 and at most 32768 channels, got {} of {}", channels,
          last(ctx.inputs[0]));
  const float eps = static_cast<float>(ctx.attrs.number("eps"));
  ScratchLayout scratch;
  const ProducerSite site(ctx, scratch);
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  const bool normed_read = ctx.output_read(0);
  return [=](const CudaKernelArgs& args) {
    const cuda::Fp8Output out = site.at(resources, args);
    bf16* normed = out.needs_bf16(normed_read) ? args.outputs[0].as<bf16>() : nullptr;
    if (residual) {
      cuda::residual_rmsnorm_forward_fp8(normed, args.outputs[1].as<bf16>(),
                                         args.outputs[2].as<float>(), args.inputs[0].as<const bf16>(),
                                         args.inputs[1].as<const bf16>(), args.inputs[2].as<const bf16>(), rows,
                                         channels, eps, out, args.stream);
    } else {
      cuda::rmsnorm_forward_fp8(normed, args.outputs[1].as<float>(), args.inputs[0].as<const bf16>(),
                                args.inputs[1].as<const bf16>(), rows, channels, eps, out, args.stream);
    }
  };
}

// swiglu_fp8 (gate, up, state).
CudaKernel bind_swiglu_fp8(const CudaBindContext& ctx) {
  const int64_t channels = last(ctx.inputs[0]), rows = ctx.inputs[0].numel() / channels;
  require(ctx, channels % 8 == 0, "the CUDA swiglu needs an intermediate size that is a multiple of 8, got {}", channels);
  ScratchLayout scratch;
  const ProducerSite site(ctx, scratch);
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  const bool out_read = ctx.output_read(0);
  return [=](const CudaKernelArgs& args) {
    const cuda::Fp8Output out = site.at(resources, args);
    cuda::swiglu_forward_fp8(out.needs_bf16(out_read) ? args.outputs[0].as<bf16>() : nullptr,
                             args.inputs[0].as<const bf16>(), args.inputs[1].as<const bf16>(), rows, channels, channels,
                             out, args.stream);
  };
}

// swiglu_backward_fp8 (d_out, gate, up, state){gate_site, up_site, format}: both gradients' codes.
CudaKernel bind_swiglu_backward_fp8(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  const int64_t channels = last(ctx.inputs[1]), rows = ctx.inputs[1].numel() / channels;
  require(ctx, channels % 8 == 0, "the CUDA swiglu needs an intermediate size that is a multiple of 8, got {}", channels);
  const cuda::Fp8Target format = target_named(ctx.attrs.string("format"));
  const int64_t gate_offset = row_offset(ctx, 3, "gate_site"), up_offset = row_offset(ctx, 3, "up_site");
  const int64_t gate_site = ctx.attrs.integer("gate_site"), up_site = ctx.attrs.integer("up_site");
  ScratchLayout scratch;
  const size_t amaxes = scratch.take(2 * sizeof(float));
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  const bool gate_read = ctx.output_read(0), up_read = ctx.output_read(1);
  return [=](const CudaKernelArgs& args) {
    float* amax = scratch_at<float>(resources, amaxes);
    const bool gate_delayed = resources->fp8_delayed(gate_site), up_delayed = resources->fp8_delayed(up_site);
    if (!gate_delayed || !up_delayed) CUDA_CHECK(cudaMemsetAsync(amax, 0, 2 * sizeof(float), args.stream));
    float* state = args.inputs[3].as<float>();
    const cuda::Fp8Output gate{state + gate_offset, amax, args.outputs[2].as<uint8_t>(), args.outputs[3].as<float>(),
                               format, gate_delayed};
    const cuda::Fp8Output up{state + up_offset, amax + 1, args.outputs[4].as<uint8_t>(), args.outputs[5].as<float>(),
                             format, up_delayed};
    cuda::swiglu_backward_fp8(gate.needs_bf16(gate_read) ? args.outputs[0].as<bf16>() : nullptr,
                              up.needs_bf16(up_read) ? args.outputs[1].as<bf16>() : nullptr,
                              args.inputs[0].as<const bf16>(), args.inputs[1].as<const bf16>(),
                              args.inputs[2].as<const bf16>(), rows, channels, gate, up, args.stream);
  };
}

// linear_fp8_backward_input_quantized (d_out, d_q, d_scale_inv, w_t, w_scale_inv [, addend]){format}:
// the product of linear_fp8_backward_input from codes its producer wrote.
CudaKernel bind_backward_input_quantized(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  const bool has_addend = ctx.inputs.size() == 6;
  const int64_t in = ctx.inputs[3].shape[0], out = ctx.inputs[3].shape[1], rows = ctx.inputs[0].numel() / out;
  const cuda::Fp8MatmulShape shape{.m = rows, .n = in, .k = out,
                                   .a_format = operand_of(target_named(ctx.attrs.string("format"))),
                                   .has_addend = has_addend};
  CudaResources* resources = &ctx.resources;
  resources->fp8_matmul();
  return [=](const CudaKernelArgs& args) {
    resources->fp8_matmul().run(shape, args.outputs[0].as<bf16>(), args.inputs[1].data, args.inputs[2].as<const float>(),
                                args.inputs[3].data, args.inputs[4].as<const float>(), nullptr,
                                has_addend ? args.inputs[5].as<const bf16>() : nullptr, args.stream);
  };
}

// fused_residual_rmsnorm_backward_fp8 (d_out, residual_out, weight, rstd [, d_residual_out], state)
// {site, format} -> (d_input [, d_weight], q, scale_inv): the block-per-rows backward with the FP8
// epilogue (cuda/kernels/rmsnorm.h); a trained weight's gradient (full fine-tuning) as the bf16
// binder makes it: fp32 partials summed into scratch, rounded into d_weight.
CudaKernel bind_norm_backward_fp8(const CudaBindContext& ctx) {
  require(ctx, ctx.outputs.size() == 3 || ctx.outputs.size() == 4,
          "the FP8 norm backward writes d_input [, d_weight], the codes and scale_inv");
  const bool weight_grad = ctx.outputs.size() == 4;
  if (weight_grad) expect_out(ctx, 1, DType::BF16);
  const int64_t channels = ctx.inputs[2].shape[0], rows = ctx.inputs[1].numel() / channels;
  require(ctx, last(ctx.inputs[1]) == channels && channels % 8 == 0 && channels <= 32768,
          "the FP8 norm backward normalises whole rows of a multiple of 8 and at most 32768 channels, got {} of {}",
          channels, last(ctx.inputs[1]));
  const bool has_residual = ctx.inputs.size() == 6;
  ScratchLayout scratch;
  const ProducerSite site(ctx, scratch);
  const size_t partials = weight_grad ? scratch.take(sizeof(float) * cuda::rmsnorm_backward_scratch_floats(rows, channels)) : 0;
  const size_t dweight = weight_grad ? scratch.take(sizeof(float) * channels) : 0;
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    float* accumulator = weight_grad ? scratch_at<float>(resources, dweight) : nullptr;
    if (weight_grad) zero_async(accumulator, sizeof(float) * channels, args.stream);
    cuda::rmsnorm_backward_fp8(args.outputs[0].as<bf16>(), accumulator,
                               weight_grad ? scratch_at<float>(resources, partials) : nullptr,
                               args.inputs[0].as<const bf16>(),
                               has_residual ? args.inputs[4].as<const bf16>() : nullptr, args.inputs[1].as<const bf16>(),
                               args.inputs[2].as<const bf16>(), args.inputs[3].as<const float>(), rows, channels,
                               site.at(resources, args), args.stream);
    if (weight_grad) cuda::convert_from_f32<bf16>(accumulator, args.outputs[1].as<bf16>(), channels, args.stream);
  };
}

// transpose_fp8 (codes [..., columns]) -> codes_t [columns, rows] (ops/defs/fp8_transpose_def.cpp).
CudaKernel bind_transpose(const CudaBindContext& ctx) {
  const int64_t columns = ctx.outputs[0].shape[0], rows = ctx.outputs[0].shape[1];
  return [=](const CudaKernelArgs& args) {
    cuda::fp8_transpose(args.inputs[0].as<const uint8_t>(), rows, columns, args.outputs[0].as<uint8_t>(), args.stream);
  };
}

}  // namespace

void register_fp8_cuda_ops(CudaOpTable& table) {
  table.add("transpose_fp8", bind_transpose);
  table.add("fused_residual_rmsnorm_backward_fp8", bind_norm_backward_fp8);
  table.add("swiglu_backward_fp8", bind_swiglu_backward_fp8);
  table.add("linear_fp8_backward_input_quantized", bind_backward_input_quantized);
  table.add("rmsnorm_fp8", [](const CudaBindContext& ctx) { return bind_rmsnorm_fp8(ctx, false); });
  table.add("fused_residual_rmsnorm_fp8", [](const CudaBindContext& ctx) { return bind_rmsnorm_fp8(ctx, true); });
  table.add("swiglu_fp8", bind_swiglu_fp8);
  table.add("quantize_fp8", bind_quantize);
  table.add("linear_fp8", bind_linear_fp8);
  table.add("quantize_fp8_weight", bind_quantize_weight);
  table.add("linear_fp8_backward_input", bind_backward_input);
  table.add("linear_fp8_backward", [](const CudaBindContext& ctx) { return bind_backward(ctx, false); });
  table.add("linear_fp8_backward_accumulate", [](const CudaBindContext& ctx) { return bind_backward(ctx, true); });
  table.add("linear_fp8_backward_quantized",
            [](const CudaBindContext& ctx) { return bind_backward_quantized(ctx, false); });
  table.add("linear_fp8_backward_quantized_accumulate",
            [](const CudaBindContext& ctx) { return bind_backward_quantized(ctx, true); });
}

}  // namespace surogate::runtime
