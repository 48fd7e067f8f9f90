// Validation on the GPU: a run on the CUDA backend evaluates with the bf16 forward plan on the GPU
// (train/device/cuda_evaluator.h, reading the training weights in place), and its eval loss and
// accuracy agree with the same run on the CPU backend (fp32 evaluator).
//
// Tolerances (bf16 weights and activations on the GPU, fp32 on the CPU):
//   before training (same weights, bf16-rounded on the GPU): |Δ eval loss| < 0.01 nats, the
//     decoder parity bound (1e-2 relative of one forward's loss, ≈ 3.8 here);
//   after 20 steps: |Δ eval loss| < 0.03 nats (the runs' trajectories differ as the training
//     losses do: tests/train_cuda/test_train_cuda.cpp), |Δ accuracy| < 0.02.
// A GPU evaluator reading stale or wrong weights misses these by a wide margin: the eval loss
// falls by more than 0.3 nats over the run.
// The evaluator runs in the training backend's arena and scratch (CudaBackend::
// share_activation_memory_with): evaluating after every step changes no bit of the training
// (per-step losses, final eval loss, checkpoint: tolerance none), in full fine-tuning with CUDA
// graphs, LoRA with dropout, and fp8_hybrid; nor does it against a run with no evaluator at all
// (the evaluation before the first step included); an evaluation that overwrote something the
// training keeps between its steps would change them.
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>

#include "cuda/device_info.h"
#include "train_cuda/cuda_trainer_fixture.h"

namespace surogate::train {
namespace {

class CudaEvaluationTest : public CudaTrainerFixture {
protected:
  static void expect_matches_cpu(const std::string& name, const std::string& extra) {
    const std::string job = "max_steps: 20\nvalidation_split_ratio: 0.1\neval_steps: 10\n" + extra;
    TrainingResult cpu = run_training(config(name + "-cpu", job), on(TrainingBackend::Cpu));
    TrainingResult cuda = run_training(config(name + "-cuda", job), on(TrainingBackend::Cuda));
    ASSERT_TRUE(cpu.initial_eval_loss && cuda.initial_eval_loss && cpu.eval_loss && cuda.eval_loss);
    std::printf("%s: eval loss before %.5f (cpu %.5f), after %.5f (cpu %.5f), accuracy %.4f (cpu %.4f)\n",
                name.c_str(), *cuda.initial_eval_loss, *cpu.initial_eval_loss, *cuda.eval_loss, *cpu.eval_loss,
                *cuda.eval_accuracy, *cpu.eval_accuracy);
    EXPECT_LT(std::abs(*cuda.initial_eval_loss - *cpu.initial_eval_loss), 0.01);
    EXPECT_LT(std::abs(*cuda.eval_loss - *cpu.eval_loss), 0.03);
    EXPECT_LT(std::abs(*cuda.eval_accuracy - *cpu.eval_accuracy), 0.02);
    EXPECT_LT(*cuda.eval_loss, *cuda.initial_eval_loss - 0.3);
  }
};

TEST_F(CudaEvaluationTest, EvaluatingAfterEveryStepChangesNoTrainingBit) {
  const std::string deterministic = "deterministic_attention: true\n";
  for (const auto& [name, job] : std::initializer_list<std::pair<std::string, std::string>>{
           {"every-full", "optimizer: adamw\ngradient_accumulation_steps: 2\nuse_cuda_graphs: true\n"},
           {"every-lora", "optimizer: adamw_8bit\nlora: true\nlora_rank: 8\nlora_alpha: 16\nlora_dropout: 0.1\n"
                          "learning_rate: 1e-2\n"},
           {"every-fp8", "optimizer: adamw\nrecipe: fp8_hybrid\n"}}) {
    expect_same_training(name, deterministic + job, "eval_steps: 1\n", on(TrainingBackend::Cuda),
                         on(TrainingBackend::Cuda));
  }
}

// The same against a run with no evaluator at all (no validation data; the held-out rows come from
// validation_datasets, so the training rows are the same): the evaluation before the first step
// writes the training's arena too, and the training must not notice.
TEST_F(CudaEvaluationTest, EvaluatingChangesNoTrainingBitAgainstARunWithoutAnEvaluator) {
  const std::string job = "deterministic_attention: true\noptimizer: adamw\ngradient_accumulation_steps: 2\n"
                          "validation_split_ratio: 0\nsave_steps: 6\nmax_steps: 6\n";
  const std::string validation =
      "validation_datasets: [{path: " + (root_ / "example" / "train.jsonl").string() +
      ", type: instruction, instruction_field: instruction, output_field: output, "
      "prompt_format: \"reverse: {instruction} = {output}\"}]\neval_steps: 1\n";
  TrainingResult without = run_training(config("no-evaluator", job), on(TrainingBackend::Cuda));
  TrainingResult with = run_training(config("evaluator", job + validation), on(TrainingBackend::Cuda));
  EXPECT_FALSE(without.eval_loss);
  ASSERT_TRUE(with.eval_loss && with.initial_eval_loss);
  ASSERT_EQ(with.step_losses.size(), without.step_losses.size());
  for (size_t i = 0; i < without.step_losses.size(); ++i) {
    EXPECT_EQ(with.step_losses[i], without.step_losses[i]) << "step " << i + 1;
  }
  EXPECT_LT(*with.eval_loss, *with.initial_eval_loss);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    expect_same_tensors(root_ / "no-evaluator" / "checkpoint-6" / file, root_ / "evaluator" / "checkpoint-6" / file);
  }
}

TEST_F(CudaEvaluationTest, FullFineTuningEvaluatesOnTheGpuLikeTheCpu) { expect_matches_cpu("eval-full", ""); }

TEST_F(CudaEvaluationTest, LoraEvaluatesOnTheGpuLikeTheCpu) {
  expect_matches_cpu("eval-lora", "lora: true\nlora_rank: 8\nlora_alpha: 16\nlora_dropout: 0.0\nlearning_rate: 1e-2\n");
}

}  // namespace
}  // namespace surogate::train
