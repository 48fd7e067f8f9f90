// CUDA binders for the LM head + cross-entropy ops (ops/defs/cross_entropy_def.cpp) on BF16 and F16
// graphs (templates on the 16-bit element type T):
// lm_head_loss, its frozen-head form lm_head_loss_with_input_grad, its trainable-head form
// lm_head_loss_with_grads, lm_head_loss_backward and lm_head_accuracy, all over the chunked kernel
// of cuda/lm_head_loss.h (the [rows, V] logits are never held whole); and the preference-tuning ops
// sequence_logps (its per-row losses summed per sequence; its backward is the same kernel with
// per-row weights −d_logps[sequence]) and preference_loss (cuda/kernels/preference_loss.h). They write the logsumexp
// output as zeros: the CUDA backward recomputes each chunk's logits and softmax in its fused
// kernel and never reads it.
#include <algorithm>

#include "core/error.h"
#include "cuda/kernels/elementwise_16bit.h"
#include "cuda/kernels/reductions.h"
#include "cuda/kernels/preference_loss.h"
#include "cuda/lm_head_loss.h"
#include "ops/defs/preference_attrs.h"
#include "runtime/cuda_bind_checks.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

namespace k = cuda;

struct LossLayout {
  int64_t rows = 0, channels = 0, vocab = 0, chunk_rows = 0;
  int weights_input = -1;  // index of the optional token-weights input (F32 [rows]), -1 when absent
};

// The op has token weights when it has one input more than `unweighted_inputs`.
void find_token_weights(const CudaBindContext& ctx, LossLayout& layout, size_t unweighted_inputs) {
  if (ctx.inputs.size() <= unweighted_inputs) return;
  expect_in(ctx, unweighted_inputs, DType::F32);
  layout.weights_input = static_cast<int>(unweighted_inputs);
}

LossLayout loss_layout(const CudaBindContext& ctx, DType dtype) {
  expect_in(ctx, 0, dtype);
  expect_in(ctx, 2, DType::I32);
  LossLayout layout;
  layout.vocab = ctx.inputs[1].shape[0];
  layout.channels = ctx.inputs[1].shape[1];
  layout.rows = ctx.inputs[0].numel() / layout.channels;
  const int64_t chunks = std::max<int64_t>(1, ctx.attrs.integer_or("chunks", 1));
  layout.chunk_rows = std::max<int64_t>(1, (layout.rows + chunks - 1) / chunks);
  require(ctx, ctx.attrs.integer_or("ignore_index", -100) == -100,
          "the CUDA cross-entropy ignores label -100 (and any label outside the vocabulary); ignore_index {} is not "
          "supported", ctx.attrs.integer_or("ignore_index", -100));
  return layout;
}

template <typename T>
cuda::LmHeadLossArgs<T> loss_arguments(const LossLayout& layout, const CudaKernelArgs& args) {
  cuda::LmHeadLossArgs<T> arguments;
  arguments.hidden = args.inputs[0].as<const T>();
  arguments.weight = args.inputs[1].as<const T>();
  arguments.labels = args.inputs[2].as<const int32_t>();
  if (layout.weights_input >= 0) arguments.weights = args.inputs[layout.weights_input].as<const float>();
  arguments.rows = layout.rows;
  arguments.channels = layout.channels;
  arguments.vocab = layout.vocab;
  arguments.chunk_rows = layout.chunk_rows;
  return arguments;
}

// Points the chunked kernel at its scratch: a chunk's logits, the row losses, their sum (offsets).
template <typename T>
void use_scratch(cuda::LmHeadLossArgs<T>& arguments, CudaResources* resources, size_t logits, size_t row_losses,
                 size_t loss_sum) {
  arguments.logits_workspace = scratch_at<T>(resources, logits);
  arguments.row_losses = scratch_at<float>(resources, row_losses);
  arguments.loss_sum = scratch_at<float>(resources, loss_sum);
}

// Where a binder's weight gradient goes. With the rows in one chunk the weight-gradient GEMM
// writes the 16-bit output itself (cuBLASLt accumulates in fp32 inside and rounds once): no fp32
// [V, C] accumulator in scratch, no zeroing, no rounding pass (on Qwen3-1.7B: 1.24 GB zeroed and
// a 0.7 ms pass per micro-batch). Over several chunks the chunks' products are summed in a fp32
// scratch accumulator (zeroed, beta = 1 per chunk), rounded into the output at the end: rounding
// each chunk's product would lose precision. When nothing reads d_weight (a frozen head) none of
// this runs: no GEMM, no accumulator.
struct LossWeightGradient {
  bool wanted = false;
  bool direct = false;
  size_t accumulator = 0;  // scratch offset of the fp32 accumulator (several chunks)
  int64_t elements = 0;

  LossWeightGradient(const LossLayout& layout, bool read, ScratchLayout& scratch)
      : wanted(read), direct(read && layout.chunk_rows >= layout.rows), elements(layout.vocab * layout.channels) {
    if (wanted && !direct) accumulator = scratch.take(sizeof(float) * static_cast<size_t>(elements));
  }
  // Points `arguments` at the output or the zeroed accumulator.
  template <typename T>
  void prepare(cuda::LmHeadLossArgs<T>& arguments, CudaResources* resources, T* output, cudaStream_t stream) const {
    if (!wanted) return;
    if (direct) {
      arguments.dweight_out = output;
      return;
    }
    arguments.dweight = scratch_at<float>(resources, accumulator);
    zero_async(arguments.dweight, sizeof(float) * static_cast<size_t>(elements), stream);
  }
  template <typename T>
  void finish(CudaResources* resources, T* output, cudaStream_t stream) const {
    if (wanted && !direct) k::convert_from_f32<T>(scratch_at<float>(resources, accumulator), output, elements, stream);
  }
};

// The forward pass shared by lm_head_loss (hidden, weight, targets, scale[, weights]) -> (loss, logsumexp)
// and its rewritten forms (compiler/loss_input_grad.h): lm_head_loss_with_input_grad (a frozen
// head) also writes output 2, d_hidden = ∂loss/∂hidden, and lm_head_loss_with_grads (a trainable
// head) outputs 2 and 3, d_hidden and d_weight = ∂loss/∂weight: the same chunks with grad_scale =
// scale, dlogits · W and dlogitsᵀ · hidden, so their backward is only d_loss times these and the
// logits are not recomputed. An output nothing reads is not computed.
template <typename T>
CudaKernel bind_lm_head_loss_forward_typed(const CudaBindContext& ctx, bool has_input_gradient, bool has_weight_gradient) {
  LossLayout layout = loss_layout(ctx, element_dtype<T>());
  find_token_weights(ctx, layout, 4);
  expect_in(ctx, 3, DType::F32);
  expect_out(ctx, 0, DType::F32);
  if (has_input_gradient) expect_out(ctx, 2, element_dtype<T>());
  if (has_weight_gradient) expect_out(ctx, 3, element_dtype<T>());
  ScratchLayout scratch;
  const size_t logits = scratch.take(sizeof(T) * layout.chunk_rows * layout.vocab);
  const size_t row_losses = scratch.take(sizeof(float) * layout.rows);
  const size_t loss_sum = scratch.take(sizeof(float));
  const LossWeightGradient weight_gradient(layout, has_weight_gradient && ctx.output_read(3), scratch);
  ctx.resources.reserve_scratch(scratch.bytes);
  const bool input_gradient = has_input_gradient && ctx.output_read(2);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    cuda::LmHeadLossArgs<T> arguments = loss_arguments<T>(layout, args);
    use_scratch(arguments, resources, logits, row_losses, loss_sum);
    if (input_gradient || weight_gradient.wanted) arguments.grad_scale = args.inputs[3].as<const float>();
    if (input_gradient) arguments.dhidden = args.outputs[2].as<T>();
    T* dweight = weight_gradient.wanted ? args.outputs[3].as<T>() : nullptr;
    weight_gradient.prepare(arguments, resources, dweight, args.stream);
    cuda::lm_head_cross_entropy(resources->matmul(), arguments, args.stream);
    weight_gradient.finish(resources, dweight, args.stream);
    k::scalar_product(arguments.loss_sum, args.inputs[3].as<const float>(), args.outputs[0].as<float>(), args.stream);
    zero_async(args.outputs[1].data, sizeof(float) * layout.rows, args.stream);
  };
}
CudaKernel bind_lm_head_loss_forward(const CudaBindContext& ctx, bool has_input_gradient, bool has_weight_gradient) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() {
    return bind_lm_head_loss_forward_typed<T>(ctx, has_input_gradient, has_weight_gradient);
  });
}

CudaKernel bind_lm_head_loss(const CudaBindContext& ctx) { return bind_lm_head_loss_forward(ctx, false, false); }
CudaKernel bind_lm_head_loss_with_input_grad(const CudaBindContext& ctx) {
  return bind_lm_head_loss_forward(ctx, true, false);
}
CudaKernel bind_lm_head_loss_with_grads(const CudaBindContext& ctx) { return bind_lm_head_loss_forward(ctx, true, true); }

// The backward of a loss whose forward kept no logits: reserves its scratch at bind time (a chunk of
// logits, the row losses, {loss_sum, grad_scale}, with `own_weights` per-row weights, the weight
// gradient's accumulator) and returns the launcher, which lets `prepare(args, grad_scale, weights)`
// write the gradient scale (and the weights) and then recomputes each chunk's logits: d_hidden into
// output 0, d_weight into output 1 (nothing when no one reads it: a frozen head, LoRA).
template <typename T, typename Prepare>
CudaKernel recomputing_backward(const CudaBindContext& ctx, const LossLayout& layout, bool own_weights, Prepare prepare) {
  expect_out(ctx, 0, element_dtype<T>());
  expect_out(ctx, 1, element_dtype<T>());
  ScratchLayout scratch;
  const size_t logits = scratch.take(sizeof(T) * layout.chunk_rows * layout.vocab);
  const size_t row_losses = scratch.take(sizeof(float) * layout.rows);
  const size_t weights = own_weights ? scratch.take(sizeof(float) * layout.rows) : 0;
  const size_t scalars = scratch.take(2 * sizeof(float));  // loss_sum, grad_scale
  const LossWeightGradient weight_gradient(layout, ctx.output_read(1), scratch);
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    cuda::LmHeadLossArgs<T> arguments = loss_arguments<T>(layout, args);
    float* row_weights = own_weights ? scratch_at<float>(resources, weights) : nullptr;
    if (own_weights) arguments.weights = row_weights;
    arguments.grad_scale = scratch_at<float>(resources, scalars) + 1;
    prepare(args, scratch_at<float>(resources, scalars) + 1, row_weights);
    use_scratch(arguments, resources, logits, row_losses, scalars);
    arguments.dhidden = args.outputs[0].as<T>();
    T* dweight = weight_gradient.wanted ? args.outputs[1].as<T>() : nullptr;
    weight_gradient.prepare(arguments, resources, dweight, args.stream);
    cuda::lm_head_cross_entropy(resources->matmul(), arguments, args.stream);
    weight_gradient.finish(resources, dweight, args.stream);
  };
}

// (hidden, weight, targets, logsumexp, d_loss, scale[, weights]) -> (d_hidden, d_weight): the
// un-rewritten backward (CompileOptions::loss_input_grad_in_forward off), which recomputes the logits.
template <typename T>
CudaKernel bind_lm_head_loss_backward_typed(const CudaBindContext& ctx) {
  LossLayout layout = loss_layout(ctx, element_dtype<T>());
  find_token_weights(ctx, layout, 6);
  expect_in(ctx, 4, DType::F32);
  expect_in(ctx, 5, DType::F32);
  return recomputing_backward<T>(ctx, layout, false, [](const CudaKernelArgs& args, float* grad_scale, float*) {
    k::scalar_product(args.inputs[4].as<const float>(), args.inputs[5].as<const float>(), grad_scale, args.stream);
  });
}
CudaKernel bind_lm_head_loss_backward(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_lm_head_loss_backward_typed<T>(ctx); });
}

// (hidden, weight, targets) -> correct: argmax hits over chunks of logits.
template <typename T>
CudaKernel bind_lm_head_accuracy_typed(const CudaBindContext& ctx) {
  const LossLayout layout = loss_layout(ctx, element_dtype<T>());
  expect_out(ctx, 0, DType::F32);
  ScratchLayout scratch;
  const size_t logits = scratch.take(sizeof(T) * layout.chunk_rows * layout.vocab);
  const size_t hits = scratch.take(sizeof(int32_t));
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    int32_t* count = scratch_at<int32_t>(resources, hits);
    zero_async(count, sizeof(int32_t), args.stream);
    T* chunk = scratch_at<T>(resources, logits);
    const T* hidden = args.inputs[0].as<const T>();
    const int32_t* labels = args.inputs[2].as<const int32_t>();
    for (int64_t row = 0; row < layout.rows; row += layout.chunk_rows) {
      const int64_t rows = std::min(layout.chunk_rows, layout.rows - row);
      cuda::MatmulShape shape{.m = rows, .n = layout.vocab, .k = layout.channels, .transpose_b = true};
      resources->matmul().run(shape, chunk, hidden + row * layout.channels, args.inputs[1].as<const T>(), nullptr,
                              args.stream);
      k::argmax_hits(count, chunk, labels + row, rows, layout.vocab, args.stream);
    }
    k::count_to_float(count, args.outputs[0].as<float>(), args.stream);
  };
}
CudaKernel bind_lm_head_accuracy(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_lm_head_accuracy_typed<T>(ctx); });
}

// (hidden, weight, targets, sequence_ids){sequences} -> (logps, logit_sums, logsumexp): the chunked
// kernel forward only, its row losses summed per sequence; logsumexp written as zeros (the backward
// recomputes the logits).
// sequence_logps(_backward)'s layout: the LM head's, with the sequence ids (I32) as input 3.
LossLayout sequence_layout(const CudaBindContext& ctx, DType dtype) {
  const LossLayout layout = loss_layout(ctx, dtype);
  expect_in(ctx, 3, DType::I32);
  return layout;
}

template <typename T>
CudaKernel bind_sequence_logps_typed(const CudaBindContext& ctx) {
  const LossLayout layout = sequence_layout(ctx, element_dtype<T>());
  expect_out(ctx, 0, DType::F32);
  expect_out(ctx, 1, DType::F32);
  const int64_t sequences = ctx.outputs[0].numel();
  ScratchLayout scratch;
  const size_t logits = scratch.take(sizeof(T) * layout.chunk_rows * layout.vocab);
  const size_t row_losses = scratch.take(sizeof(float) * layout.rows);
  const size_t loss_sum = scratch.take(sizeof(float));
  const size_t column_means = scratch.take(sizeof(float) * layout.channels);
  ctx.resources.reserve_scratch(scratch.bytes);
  const bool logit_sums = ctx.output_read(1);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    cuda::LmHeadLossArgs<T> arguments = loss_arguments<T>(layout, args);
    use_scratch(arguments, resources, logits, row_losses, loss_sum);
    cuda::lm_head_cross_entropy(resources->matmul(), arguments, args.stream);
    const int32_t* sequence_ids = args.inputs[3].as<const int32_t>();
    k::sequence_logps_from_row_losses(arguments.row_losses, arguments.labels, sequence_ids, layout.rows, layout.vocab,
                                      sequences, args.outputs[0].as<float>(), args.stream);
    if (logit_sums) {
      k::sequence_logit_sums(arguments.hidden, arguments.weight, arguments.labels, sequence_ids, layout.rows,
                             layout.channels, layout.vocab, sequences, scratch_at<float>(resources, column_means),
                             args.outputs[1].as<float>(), args.stream);
    }
    zero_async(args.outputs[2].data, sizeof(float) * layout.rows, args.stream);
  };
}

// (hidden, weight, targets, sequence_ids, logsumexp, d_logps) -> (d_hidden, d_weight): the chunked
// kernel with per-row weights −d_logps[sequence] and grad_scale 1.
template <typename T>
CudaKernel bind_sequence_logps_backward_typed(const CudaBindContext& ctx) {
  const LossLayout layout = sequence_layout(ctx, element_dtype<T>());
  expect_in(ctx, 5, DType::F32);
  const int64_t rows = layout.rows;
  return recomputing_backward<T>(ctx, layout, true, [rows](const CudaKernelArgs& args, float* grad_scale, float* weights) {
    k::sequence_token_weights(args.inputs[5].as<const float>(), args.inputs[3].as<const int32_t>(), rows, weights,
                              grad_scale, args.stream);
  });
}
CudaKernel bind_sequence_logps(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_sequence_logps_typed<T>(ctx); });
}
CudaKernel bind_sequence_logps_backward(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype,
                         [&]<typename T>() { return bind_sequence_logps_backward_typed<T>(ctx); });
}

cuda::PreferenceLossParams preference_params(const CudaBindContext& ctx) {
  const ops::PreferenceLossOptions o = ops::defs::preference_loss_options(ctx.attrs);
  return {.type = static_cast<int>(o.type), .beta = o.beta, .label_smoothing = o.label_smoothing,
          .target_margin = o.target_margin, .simpo_gamma = o.simpo_gamma, .orpo_beta = o.orpo_beta,
          .desirable_weight = o.desirable_weight, .undesirable_weight = o.undesirable_weight,
          .length_norm = o.length_norm, .reference_free = o.reference_free};
}

// preference_loss (logps, reference_logps, lengths, labels, scales) -> loss, and its backward
// (..., d_loss) -> d_logps: F32 statistics, one block.
CudaKernel bind_preference_loss(const CudaBindContext& ctx) {
  for (size_t index = 0; index < 5; ++index) expect_in(ctx, index, DType::F32);
  const cuda::PreferenceLossParams params = preference_params(ctx);
  const int64_t pairs = ctx.inputs[3].numel();
  const bool backward = ctx.inputs.size() == 6;
  return [=](const CudaKernelArgs& args) {
    const float* in[5];
    for (size_t index = 0; index < 5; ++index) in[index] = args.inputs[index].as<const float>();
    k::preference_loss(params, pairs, in[0], in[1], in[2], in[3], in[4],
                       backward ? args.inputs[5].as<const float>() : nullptr, backward ? nullptr : args.outputs[0].as<float>(),
                       backward ? args.outputs[0].as<float>() : nullptr, args.stream);
  };
}

}  // namespace

void register_loss_cuda_ops(CudaOpTable& table) {
  table.add("lm_head_loss", bind_lm_head_loss);
  table.add("lm_head_loss_with_input_grad", bind_lm_head_loss_with_input_grad);
  table.add("lm_head_loss_with_grads", bind_lm_head_loss_with_grads);
  table.add("lm_head_loss_backward", bind_lm_head_loss_backward);
  table.add("lm_head_accuracy", bind_lm_head_accuracy);
  table.add("sequence_logps", bind_sequence_logps);
  table.add("sequence_logps_backward", bind_sequence_logps_backward);
  table.add("preference_loss", bind_preference_loss);
  table.add("preference_loss_backward", bind_preference_loss);
}

}  // namespace surogate::runtime
