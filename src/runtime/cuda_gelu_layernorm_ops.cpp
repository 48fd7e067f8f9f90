// CUDA binders for gelu / gelu_backward and layernorm / layernorm_backward (ops/defs/gelu_def.cpp,
// layernorm_def.cpp) on BF16 and F16 graphs, over cuda/kernels/gelu.h and layernorm.h. As for
// rmsnorm (cuda_model_ops.cpp), the parameter gradients are summed in fp32 scratch and rounded
// once into the graph's 16-bit d_weight / d_bias; mean and rstd are F32.
#include "cuda/kernels/elementwise_16bit.h"
#include "cuda/kernels/gelu.h"
#include "cuda/kernels/layernorm.h"
#include "runtime/cuda_bind_checks.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

// The op's `approximate` attribute (validated by its shape rule): none, tanh or quick.
cuda::GeluForm gelu_form(const CudaBindContext& ctx) {
  const std::string form = ctx.attrs.string_or("approximate", "none");
  if (form == "quick") return cuda::GeluForm::Quick;
  return form == "tanh" ? cuda::GeluForm::Tanh : cuda::GeluForm::Erf;
}

template <typename T>
CudaKernel bind_gelu_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  const int64_t count = ctx.inputs[0].numel();
  const cuda::GeluForm form = gelu_form(ctx);
  return [=](const CudaKernelArgs& args) {
    cuda::gelu_forward(args.outputs[0].as<T>(), args.inputs[0].as<const T>(), count, form, args.stream);
  };
}
CudaKernel bind_gelu(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_gelu_typed<T>(ctx); });
}

template <typename T>
CudaKernel bind_gelu_backward_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  expect_in(ctx, 1, element_dtype<T>());
  const int64_t count = ctx.inputs[1].numel();
  const cuda::GeluForm form = gelu_form(ctx);
  return [=](const CudaKernelArgs& args) {
    cuda::gelu_backward(args.outputs[0].as<T>(), args.inputs[0].as<const T>(), args.inputs[1].as<const T>(), count,
                        form, args.stream);
  };
}
CudaKernel bind_gelu_backward(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[1].dtype, [&]<typename T>() { return bind_gelu_backward_typed<T>(ctx); });
}

// layernorm (x, weight [, bias]) -> out, mean, rstd.
template <typename T>
CudaKernel bind_layernorm_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  expect_out(ctx, 1, DType::F32);
  expect_out(ctx, 2, DType::F32);
  const int64_t channels = ctx.inputs[1].shape[0], rows = ctx.inputs[0].numel() / channels;
  const float eps = static_cast<float>(ctx.attrs.number("eps"));
  const bool has_bias = ctx.inputs.size() == 3;
  return [=](const CudaKernelArgs& args) {
    cuda::layernorm_forward(args.outputs[0].as<T>(), args.outputs[1].as<float>(), args.outputs[2].as<float>(),
                            args.inputs[0].as<const T>(), args.inputs[1].as<const T>(),
                            has_bias ? args.inputs[2].as<const T>() : nullptr, rows, channels, eps, args.stream);
  };
}
CudaKernel bind_layernorm(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_layernorm_typed<T>(ctx); });
}

// layernorm_backward (d_out, x, weight, mean, rstd) -> d_x [, d_weight] [, d_bias].
template <typename T>
CudaKernel bind_layernorm_backward_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, element_dtype<T>());
  expect_in(ctx, 3, DType::F32);
  expect_in(ctx, 4, DType::F32);
  const bool weight_grad = ctx.attrs.boolean_or("weight_grad", true);
  const bool bias_grad = ctx.attrs.boolean_or("bias_grad", false);
  const int64_t channels = ctx.inputs[2].shape[0], rows = ctx.inputs[1].numel() / channels;
  const bool parameters = weight_grad || bias_grad;
  ScratchLayout layout;
  const size_t partials = parameters ? layout.take(sizeof(float) * cuda::layernorm_backward_scratch_floats(rows, channels)) : 0;
  const size_t dweight = weight_grad ? layout.take(sizeof(float) * channels) : 0;
  const size_t dbias = bias_grad ? layout.take(sizeof(float) * channels) : 0;
  ctx.resources.reserve_scratch(layout.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    float* weight_sums = weight_grad ? scratch_at<float>(resources, dweight) : nullptr;
    float* bias_sums = bias_grad ? scratch_at<float>(resources, dbias) : nullptr;
    cuda::layernorm_backward(args.outputs[0].as<T>(), weight_sums, bias_sums,
                             parameters ? scratch_at<float>(resources, partials) : nullptr,
                             args.inputs[0].as<const T>(), args.inputs[1].as<const T>(), args.inputs[2].as<const T>(),
                             args.inputs[3].as<const float>(), args.inputs[4].as<const float>(), rows, channels,
                             args.stream);
    size_t next = 1;
    if (weight_grad) cuda::convert_from_f32<T>(weight_sums, args.outputs[next++].as<T>(), channels, args.stream);
    if (bias_grad) cuda::convert_from_f32<T>(bias_sums, args.outputs[next].as<T>(), channels, args.stream);
  };
}
CudaKernel bind_layernorm_backward(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_layernorm_backward_typed<T>(ctx); });
}

}  // namespace

void register_gelu_layernorm_cuda_ops(CudaOpTable& table) {
  table.add("gelu", bind_gelu);
  table.add("gelu_backward", bind_gelu_backward);
  table.add("layernorm", bind_layernorm);
  table.add("layernorm_backward", bind_layernorm_backward);
}

}  // namespace surogate::runtime
