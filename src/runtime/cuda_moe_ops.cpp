// CUDA binders of the mixture-of-experts ops (ops/defs/moe_*_def.cpp, expert_linear_def.cpp) on
// bf16 graphs: activations bf16, router weights / probabilities / statistics F32, indices I32.
// The kernels are cuda/kernels/moe_routing.h's; expert_linear and its backward ops are one CUTLASS
// grouped GEMM each (cuda/kernels/grouped_gemm.h), sized on the device from moe_dispatch's offsets, so
// an MoE step launches no per-expert work and never waits for the host. Limits checked at load
// time (UserError naming the node): an SM90 GPU for the grouped GEMMs, at most 512 experts, top-k
// at most 16, widths that are multiples of 8.
#include <memory>

#include "cuda/kernels/grouped_gemm.h"
#include "cuda/kernels/moe_routing.h"
#include "runtime/cuda_bind_checks.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

using bf16 = __nv_bfloat16;

cuda::RouterShape router_shape(const CudaBindContext& ctx, const graph::TensorType& probs, int64_t top_k) {
  const int64_t experts = last(probs);
  require(ctx, experts <= cuda::kMaxExperts, "the CUDA router handles at most {} experts, got {}", cuda::kMaxExperts,
          experts);
  require(ctx, top_k <= cuda::kMaxTopK, "the CUDA router picks at most {} experts per token, got {}", cuda::kMaxTopK,
          top_k);
  return {probs.numel() / experts, static_cast<int>(experts), static_cast<int>(top_k),
          ctx.attrs.boolean_or("normalize", false)};
}

void require_width(const CudaBindContext& ctx, int64_t width) {
  require(ctx, width % 8 == 0, "the CUDA MoE kernels need a hidden width that is a multiple of 8, got {}", width);
}

CudaKernel bind_router_topk(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  expect_out(ctx, 0, DType::F32);
  expect_out(ctx, 2, DType::F32);
  const cuda::RouterShape shape = router_shape(ctx, ctx.outputs[2], last(ctx.outputs[0]));
  return [=](const CudaKernelArgs& args) {
    cuda::router_topk_forward(args.inputs[0].as<const bf16>(), shape, args.outputs[0].as<float>(),
                              args.outputs[1].as<int32_t>(), args.outputs[2].as<float>(), args.stream);
  };
}

CudaKernel bind_router_topk_backward(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::F32);
  expect_in(ctx, 1, DType::F32);
  expect_out(ctx, 0, DType::BF16);
  const cuda::RouterShape shape = router_shape(ctx, ctx.inputs[1], last(ctx.inputs[2]));
  const bool with_probs = ctx.inputs.size() == 5;
  return [=](const CudaKernelArgs& args) {
    cuda::router_topk_backward(args.inputs[0].as<const float>(), with_probs ? args.inputs[4].as<const float>() : nullptr,
                               args.inputs[1].as<const float>(), args.inputs[2].as<const int32_t>(),
                               args.inputs[3].as<const float>(), shape, args.outputs[0].as<bf16>(), args.stream);
  };
}

CudaKernel bind_moe_dispatch(const CudaBindContext& ctx) {
  const int64_t assignments = ctx.inputs[0].numel(), experts = ctx.attrs.integer("experts");
  require(ctx, experts <= cuda::kMaxExperts, "the CUDA dispatch handles at most {} experts, got {}", cuda::kMaxExperts,
          experts);
  ScratchLayout layout;
  const size_t counts = layout.take(sizeof(int32_t) * cuda::moe_dispatch_scratch_elements(assignments, static_cast<int>(experts)));
  ctx.resources.reserve_scratch(layout.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    cuda::moe_dispatch(args.inputs[0].as<const int32_t>(), assignments, static_cast<int>(experts),
                       args.outputs[0].as<int32_t>(), args.outputs[1].as<int32_t>(), args.outputs[2].as<int32_t>(),
                       scratch_at<int32_t>(resources, counts), args.stream);
  };
}

CudaKernel bind_moe_permute(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  const int64_t width = last(ctx.inputs[0]), top_k = last(ctx.inputs[2]), assignments = ctx.inputs[1].numel();
  require_width(ctx, width);
  return [=](const CudaKernelArgs& args) {
    cuda::moe_permute(args.inputs[0].as<const bf16>(), args.inputs[1].as<const int32_t>(), assignments,
                      static_cast<int>(top_k), width, args.outputs[0].as<bf16>(), args.stream);
  };
}

CudaKernel bind_moe_permute_backward(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  const int64_t width = ctx.inputs[0].shape[1], top_k = last(ctx.inputs[1]), tokens = ctx.inputs[1].numel() / top_k;
  require_width(ctx, width);
  return [=](const CudaKernelArgs& args) {
    cuda::moe_permute_backward(args.inputs[0].as<const bf16>(), args.inputs[1].as<const int32_t>(), tokens,
                               static_cast<int>(top_k), width, args.outputs[0].as<bf16>(), args.stream);
  };
}

CudaKernel bind_moe_unpermute(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  expect_in(ctx, 1, DType::F32);
  const int64_t width = ctx.inputs[0].shape[1], top_k = last(ctx.inputs[2]), tokens = ctx.inputs[2].numel() / top_k;
  require_width(ctx, width);
  return [=](const CudaKernelArgs& args) {
    cuda::moe_unpermute(args.inputs[0].as<const bf16>(), args.inputs[1].as<const float>(),
                        args.inputs[2].as<const int32_t>(), tokens, static_cast<int>(top_k), width,
                        args.outputs[0].as<bf16>(), args.stream);
  };
}

CudaKernel bind_moe_unpermute_backward(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::BF16);
  expect_in(ctx, 2, DType::F32);
  const int64_t width = ctx.inputs[1].shape[1], top_k = last(ctx.inputs[3]), tokens = ctx.inputs[3].numel() / top_k;
  require_width(ctx, width);
  return [=](const CudaKernelArgs& args) {
    cuda::moe_unpermute_backward(args.inputs[0].as<const bf16>(), args.inputs[1].as<const bf16>(),
                                 args.inputs[2].as<const float>(), args.inputs[3].as<const int32_t>(), tokens,
                                 static_cast<int>(top_k), width, args.outputs[0].as<bf16>(),
                                 args.outputs[1].as<float>(), args.stream);
  };
}

CudaKernel bind_router_statistics(const CudaBindContext& ctx) {
  expect_in(ctx, 0, DType::F32);
  const cuda::RouterShape shape = router_shape(ctx, ctx.inputs[0], last(ctx.inputs[1]));
  return [=](const CudaKernelArgs& args) {
    cuda::router_statistics(args.inputs[0].as<const float>(), args.inputs[1].as<const int32_t>(), shape,
                            args.outputs[0].as<float>(), args.outputs[1].as<float>(), args.stream);
  };
}

CudaKernel bind_router_statistics_backward(const CudaBindContext& ctx) {
  ctx.expect_all(DType::F32);
  const int64_t experts = last(ctx.inputs[1]), tokens = ctx.inputs[1].numel() / experts;
  return [=](const CudaKernelArgs& args) {
    cuda::router_statistics_backward(args.inputs[0].as<const float>(), tokens, static_cast<int>(experts),
                                     args.outputs[0].as<float>(), args.stream);
  };
}

CudaKernel bind_router_aux_loss(const CudaBindContext& ctx) {
  ctx.expect_all(DType::F32);
  const int experts = static_cast<int>(ctx.inputs[0].shape[0]);
  const float scale = static_cast<float>(ctx.attrs.number("scale"));
  return [=](const CudaKernelArgs& args) {
    cuda::router_aux_loss(args.inputs[0].as<const float>(), args.inputs[1].as<const float>(), experts, scale,
                          args.outputs[0].as<float>(), args.stream);
  };
}

CudaKernel bind_router_aux_loss_backward(const CudaBindContext& ctx) {
  ctx.expect_all(DType::F32);
  const int experts = static_cast<int>(ctx.inputs[1].shape[0]);
  const float scale = static_cast<float>(ctx.attrs.number("scale"));
  return [=](const CudaKernelArgs& args) {
    cuda::router_aux_loss_backward(args.inputs[0].as<const float>(), args.inputs[1].as<const float>(), experts, scale,
                                   args.outputs[0].as<float>(), args.stream);
  };
}

CudaKernel bind_sigmoid_gated_add(const CudaBindContext& ctx) {
  ctx.expect_all(DType::BF16);
  const int64_t width = last(ctx.inputs[1]), rows = ctx.inputs[1].numel() / width;
  require_width(ctx, width);
  return [=](const CudaKernelArgs& args) {
    cuda::sigmoid_gated_add(args.inputs[0].as<const bf16>(), args.inputs[1].as<const bf16>(),
                            args.inputs[2].as<const bf16>(), rows, width, args.outputs[0].as<bf16>(), args.stream);
  };
}

CudaKernel bind_sigmoid_gated_add_backward(const CudaBindContext& ctx) {
  ctx.expect_all(DType::BF16);
  const int64_t width = last(ctx.inputs[1]), rows = ctx.inputs[1].numel() / width;
  require_width(ctx, width);
  return [=](const CudaKernelArgs& args) {
    cuda::sigmoid_gated_add_backward(args.inputs[0].as<const bf16>(), args.inputs[1].as<const bf16>(),
                                     args.inputs[2].as<const bf16>(), rows, width, args.outputs[0].as<bf16>(),
                                     args.outputs[1].as<bf16>(), args.stream);
  };
}

// expert_linear and its backward ops: the weight [E, out, in] is input 1 (forward, backward input)
// or the output (weight gradients).
CudaKernel bind_grouped(const CudaBindContext& ctx, cuda::GroupedGemmKind kind, bool accumulate) {
  for (size_t i = 0; i < 2; ++i) expect_in(ctx, i, DType::BF16);
  expect_in(ctx, 2, DType::I32);
  expect_out(ctx, 0, DType::BF16);
  require(ctx, cuda::grouped_gemm_supported(),
          "the MoE experts' grouped GEMMs need an SM90 GPU (H100 / H200) in this build");
  const graph::TensorType& weight = kind == cuda::GroupedGemmKind::BackwardWeight ? ctx.outputs[0] : ctx.inputs[1];
  const int experts = static_cast<int>(weight.shape[0]);
  const int64_t out = weight.shape[1], in = weight.shape[2];
  require(ctx, out % 8 == 0 && in % 8 == 0,
          "the grouped expert GEMMs need projection sizes that are multiples of 8 (a LoRA rank too), got {} x {}", out,
          in);
  auto gemm = std::make_shared<cuda::GroupedGemm>(kind, experts, out, in, accumulate);
  return [gemm](const CudaKernelArgs& args) {
    gemm->run(args.inputs[2].as<const int32_t>(), args.inputs[0].as<const bf16>(), args.inputs[1].as<const bf16>(),
              args.outputs[0].as<bf16>(), args.stream);
  };
}

}  // namespace

void register_moe_cuda_ops(CudaOpTable& table) {
  table.add("router_topk", bind_router_topk);
  table.add("router_topk_backward", bind_router_topk_backward);
  table.add("moe_dispatch", bind_moe_dispatch);
  table.add("moe_permute", bind_moe_permute);
  table.add("moe_permute_backward", bind_moe_permute_backward);
  table.add("moe_unpermute", bind_moe_unpermute);
  table.add("moe_unpermute_backward", bind_moe_unpermute_backward);
  table.add("router_statistics", bind_router_statistics);
  table.add("router_statistics_backward", bind_router_statistics_backward);
  table.add("router_aux_loss", bind_router_aux_loss);
  table.add("router_aux_loss_backward", bind_router_aux_loss_backward);
  table.add("sigmoid_gated_add", bind_sigmoid_gated_add);
  table.add("sigmoid_gated_add_backward", bind_sigmoid_gated_add_backward);
  table.add("expert_linear", [](const CudaBindContext& ctx) {
    return bind_grouped(ctx, cuda::GroupedGemmKind::Forward, false);
  });
  table.add("expert_linear_backward_input", [](const CudaBindContext& ctx) {
    return bind_grouped(ctx, cuda::GroupedGemmKind::BackwardInput, false);
  });
  table.add("expert_linear_backward_weight", [](const CudaBindContext& ctx) {
    return bind_grouped(ctx, cuda::GroupedGemmKind::BackwardWeight, false);
  });
  table.add("expert_linear_backward_weight_accumulate", [](const CudaBindContext& ctx) {
    return bind_grouped(ctx, cuda::GroupedGemmKind::BackwardWeight, true);
  });
}

}  // namespace surogate::runtime
