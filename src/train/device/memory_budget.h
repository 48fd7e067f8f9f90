// What a training run holds on its device, judged before anything is allocated: the test the
// recompute choice asks (compiler/recompute_choice.h) and what `--dry-run` prints
// (train/memory_prediction.h). A plan's own regions (activation arena, parameters, gradients,
// batch) come from its memory plan; the per-trainable-parameter state (master weights, gradient
// accumulators, optimizer state) from the configuration, as the CUDA training device lays it out;
// beside the plan the device holds the LM head's workspace, the evaluator's own backend (its
// forward arena and LM-head workspace) and, on a GPU, the CUDA context and libraries. Measured on
// the H100 against nvidia-smi (bench/results/HISTORY.md): within 0.1% on 0.6B and 8B LoRA and on 4B full
// fine-tuning.
#pragma once

#include <cstddef>
#include <cstdint>

#include "compiler/execution_plan.h"
#include "config/sections/offload.h"
#include "config/sections/optimizer.h"
#include "config/sections/precision.h"
#include "train/device/gradient_buckets.h"

namespace surogate::train {

// What a plan needs on the device, by category.
struct PlanMemory {
  size_t activations = 0;   // the activation arena
  size_t weights = 0;       // the parameters region (every weight, frozen or trainable)
  size_t gradients = 0;     // the parameter-gradient region (one micro-batch's gradients)
  size_t inputs = 0;        // the batch
  size_t masters = 0;       // fp32 master weights of the trainable parameters
  size_t accumulators = 0;  // gradient accumulators across micro-batches
  size_t optimizer = 0;     // optimizer state
  size_t staging = 0;       // offload staging: two GPU slots (host_offload_plan.h)
  size_t gathered = 0;      // ZeRO-3: the per-layer gather buffers (weights then holds the rank's shard)
  size_t quantized_base = 0;  // ZeRO-3: the quantized base on the device (quantized_base_shards.h); weights then excludes it
  // The activation arena above is what stays on the device with offload_residual; the residual
  // checkpoints it moves live in the plan's host region (pinned host memory on a GPU).
  size_t total() const {
    return activations + weights + gradients + inputs + masters + accumulators + optimizer + staging + gathered +
           quantized_base;
  }
  // Not on the device: what offload_master / offload_optimizer / offload_grads put in pinned
  // host memory instead (the three categories above are then 0), offload_residual's host region, and
  // offload_quants' image of the quantized base (quantized_base is then 0).
  size_t host_masters = 0, host_accumulators = 0, host_optimizer = 0, host_residuals = 0, host_quantized = 0;
  size_t host() const { return host_masters + host_accumulators + host_optimizer + host_residuals + host_quantized; }
};
// ZeRO-2/3 over `ranks` (> 1): a rank's gradient accumulators are the largest shard's plus
// `staging_slots` slots of the largest gradient bucket (train/device/sharded_gradients.h: CPU ranks
// one, GPUs two), buckets of `bucket_bytes` of accumulators.
struct GradientSharding {
  int ranks = 1;
  int staging_slots = 0;
  size_t bucket_bytes = kGradientBucketBytes;
};

// With `optimizer_shards` > 1 (data-parallel GPUs, ZeRO-1), `optimizer` is the largest shard's:
// the trainable tensors placed over the ranks as the device places them (distributed::place_shards).
// With `weight_shards` > 1 (ZeRO-3 over that many ranks, train/device/weight_shards.h), `weights`
// is the parameter region left (what is not sharded) plus the largest rank's shard of the rest,
// `gathered` the gather buffers, and `masters` the largest shard's masters. Under ZeRO-3 (and with
// offload_quants, which runs it on one GPU too) the quantized base is its own category, as
// persistent_quants / offload_quants keep it: the largest rank's share (the default), the whole
// (persistent_quants) or nothing on the device and the whole in host_quantized (offload_quants),
// its per-layer byte buffers in `gathered`.
// `gradient_sharding` (ZeRO-2/3) shrinks `accumulators` as above.
// The sections the per-parameter state follows: its dtypes, the optimizer's layout, what is offloaded.
struct TrainingStateOptions {
  const config::Precision& precision;
  const config::Optimizer& optimizer;
  const config::Offload& offload;
};
PlanMemory plan_memory(const compiler::ExecutionPlan& plan, const TrainingStateOptions& options,
                       int optimizer_shards = 1, int weight_shards = 1, const GradientSharding& gradient_sharding = {});

// The scratch the CUDA lm_head_loss ops of `plan` take (runtime/cuda_loss_ops.cpp): one chunk of
// bf16 logits, the per-row losses and, with a trainable head whose rows are split into several
// chunks, its fp32 weight-gradient accumulator (one chunk: the GEMM writes the bf16 d_weight, an
// arena tensor the plan counts). 0 when the plan has no LM head loss.
size_t lm_head_workspace_bytes(const compiler::ExecutionPlan& plan);

// The scratch the CUDA attention_backward ops of `plan` take at most, on either path
// (runtime::planned_attention_scratch_bytes for the largest of them). The backend reserves the
// exact bytes when it binds; this is the prediction's. 0 without one.
size_t attention_workspace_bytes(const compiler::ExecutionPlan& plan);

// What the CUDA context, cuBLASLt's workspace and the kernels' modules hold (H100, driver 580).
inline constexpr size_t kCudaContextBytes = size_t{600} << 20;

// NCCL's buffers for a sequence group's all-to-alls (per GPU), which the plan does not see:
// measured 1.9 and 2.7 GiB above the prediction with 2 and 4 sequence ranks (Qwen3-8B LoRA at
// 245,760 and 495,616 tokens, H200s, 2026-11-28; data parallelism alone: within 0.2 GiB).
inline constexpr size_t kSequenceExchangeBufferBytes = size_t{3} << 30;

// Everything a run holds on its device, as predicted.
struct MemoryEstimate {
  PlanMemory plan;                 // the training plan's regions and its trainable state
  size_t lm_head_workspace = 0;    // the training backend's LM-head scratch
  size_t attention_workspace = 0;  // CUDA: the steps' shared scratch beyond the LM head's (attention backward)
  // The evaluator's backend: its forward arena and LM-head scratch (and, gathering, its buffers).
  // On a GPU whose evaluator shares the training backend's memory (CudaBackend::
  // share_activation_memory_with), a region that fits in the training's costs nothing: see
  // evaluation().
  size_t evaluation_arena = 0, evaluation_scratch = 0, evaluation_other = 0;
  bool evaluation_shares_training_memory = false;
  size_t context = 0;              // CUDA context and libraries (0 on the CPU)
  size_t collectives = 0;          // GPUs of a sequence group: NCCL's all-to-all buffers
  size_t weight_copies = 0;        // CPU ranks under ZeRO-3: the host copies of every weight (one per process)
  size_t pipeline = 0;             // pipeline stages: the forward plan and the micro-batches in flight
  // surogate grpo: each rank's rollout model (train/objective/grpo_rollout_model.h), beside its
  // trainer's weights: the KV caches, and the decode and prefill plans' arenas and inputs.
  size_t rollout_caches = 0, rollout_activations = 0;
  // surogate grpo with beta ≠ 0: each rank's KL reference model (its KV caches and arenas) and,
  // under full fine-tuning, its frozen copy of the starting weights.
  size_t reference_weights = 0, reference_model = 0;
  int ranks = 1;                   // CPU data parallel (gpus: N on the CPU backend): rank threads
  int gpus = 1;                    // GPU data parallel: the estimate is per GPU (GPU 0's, with the evaluator)
  bool shard_weights = false;      // ZeRO-3 over the ranks or GPUs above
  // Every CPU rank thread holds its own backend (weights, gradients, activations, LM-head
  // scratch, rollout model) and its share of the optimizer state; one evaluator serves them all. Each GPU holds
  // the same but its shard of the optimizer state (plan.optimizer is already the largest shard).
  // What the evaluator adds to the peak: each region whole unless it fits in the training's (the
  // arena in the plan's, the scratch in the one the LM head and attention share).
  size_t evaluation() const {
    const bool arena_fits = evaluation_shares_training_memory && evaluation_arena <= plan.activations;
    const bool scratch_fits =
        evaluation_shares_training_memory && evaluation_scratch <= lm_head_workspace + attention_workspace;
    return (arena_fits ? 0 : evaluation_arena) + (scratch_fits ? 0 : evaluation_scratch) + evaluation_other;
  }
  size_t peak() const {
    return static_cast<size_t>(ranks) * (plan.total() - plan.optimizer + lm_head_workspace + attention_workspace +
                                         pipeline + rollout_caches + rollout_activations + reference_weights + reference_model) +
           plan.optimizer +
           evaluation() + context + collectives + weight_copies;
  }
  // Pinned host memory the offload_* options take (per GPU).
  size_t host_offloaded() const { return plan.host(); }
};

// Kept free beyond the prediction, for what it does not see (allocator rounding, fragmentation):
// 2% of the device's memory, at least 1 GiB.
size_t device_margin_bytes(size_t total_bytes);

}  // namespace surogate::train
