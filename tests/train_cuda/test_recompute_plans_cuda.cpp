// The recompute plans on the CUDA backend train the same job to the same bits: nothing recomputed,
// the cheap ops (norms, RoPE, SwiGLU, dropout) re-run in every layer with the matmul and attention
// outputs kept, the choice's middle plan that keeps every activation of some layers
// (RecomputePolicy::keep_all_layers) and re-runs the cheap ops in the others, and the last tiers
// with attention's outputs kept in the first layer (keep_attention_layers: its products re-run, its
// attention not) against everything recomputed.
// Tolerance: none. Kernels are deterministic (cuDNN's attention backward with
// deterministic_attention), and a recomputed tensor is the same kernel on the same inputs, so the
// per-step losses, eval loss and checkpoint (weights, optimizer state) are equal bit for bit; a
// recomputed copy read before it is written, or a kept tensor whose memory the plan lent to
// another, changes them.
#include <gtest/gtest.h>

#include <string>

#include "train_cuda/cuda_trainer_fixture.h"

namespace surogate::train {
namespace {

class CudaRecomputePlansTest : public CudaTrainerFixture {
protected:
  static TrainerOptions cuda(const compiler::RecomputePolicy& recompute) {
    TrainerOptions options = on(TrainingBackend::Cuda);
    options.recompute = recompute;
    return options;
  }
  // Cheap ops re-run in every layer; `whole` layers (from the first) keep everything.
  static compiler::RecomputePolicy cheap(int64_t whole = 0) {
    compiler::RecomputePolicy policy = compiler::RecomputePolicy::all();
    policy.keep_expensive_layers = 1 << 20;  // every layer
    policy.keep_all_layers = whole;
    return policy;
  }
  // Everything recomputed (only each block's input kept with `inputs_only`); the first `attention`
  // layers keep attention's outputs.
  static compiler::RecomputePolicy everything(bool inputs_only, int64_t attention = 0) {
    compiler::RecomputePolicy policy = compiler::RecomputePolicy::all();
    policy.block_inputs_only = inputs_only;
    policy.keep_attention_layers = attention;
    return policy;
  }
};

constexpr const char* kFull = "optimizer: adamw\ngradient_accumulation_steps: 2\ndeterministic_attention: true\n";
constexpr const char* kLora = "optimizer: adamw_8bit\nlora: true\nlora_rank: 8\nlora_alpha: 16\nlora_dropout: 0.1\n"
                              "learning_rate: 1e-2\ndeterministic_attention: true\n";

TEST_F(CudaRecomputePlansTest, FullFineTuningWholeLayersAgainstCheapOpsAndNothingRecomputed) {
  expect_same_training("full-cheap-whole", kFull, "", cuda(cheap()), cuda(cheap(1)));
  expect_same_training("full-none-whole", kFull, "", cuda(compiler::RecomputePolicy::none()), cuda(cheap(1)));
}

TEST_F(CudaRecomputePlansTest, LoraWithDropoutWholeLayersAgainstCheapOps) {
  expect_same_training("lora-cheap-whole", kLora, "", cuda(cheap()), cuda(cheap(1)));
}

TEST_F(CudaRecomputePlansTest, AttentionsOutputsKeptAgainstEverythingRecomputed) {
  expect_same_training("full-attention-kept", kFull, "", cuda(everything(false)), cuda(everything(false, 1)));
  expect_same_training("lora-inputs-only-attention-kept", kLora, "", cuda(everything(true)),
                       cuda(everything(true, 1)));
}

}  // namespace
}  // namespace surogate::train
