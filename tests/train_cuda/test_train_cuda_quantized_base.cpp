// ZeRO-3's quantized base on GPUs (train/device/quantized_base_shards.h, cuda_quantized_base.h):
// shard_weights alone keeps each GPU's share of the quantized pieces in device memory and gathers a
// layer's bytes on the side stream one use ahead (NCCL all-gather); persistent_quants keeps the
// whole base in every GPU's parameters; offload_quants keeps one pinned host image and copies a
// layer's pieces host → device on the side stream one use ahead. The evaluator gathers the base
// from host memory unless persistent_quants keeps it whole.
//
// World of one (any GPU): the single-GPU device against the ZeRO-3 data-parallel device with one
// rank in each mode — tolerance none: the same quantized bytes, gathered 256-byte aligned as the
// parameter region places them (so cuBLASLt picks the same algorithms), the same kernels in the
// same order: per-step losses and eval loss bit for bit, the checkpoints byte for byte. QLoRA NF4
// and FP8 blocks, and fp8_hybrid with LoRA (the frozen base's FP8 copies). offload_quants without
// the test's data_parallel_device switch (one GPU: the trainer picks the ZeRO-3 device itself).
//
// Two GPUs (skipped with fewer): gpus: 2, zero_level: 3 in the three modes equal one another bit
// for bit (losses, eval loss, adapter), and track one GPU with twice the accumulation within the
// bounds of the other 2-GPU tests (test_train_cuda_data_parallel.cpp: step 1 within 1e-5, every
// step within 0.01, the last 5 steps' mean within 0.005).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <map>
#include <string>
#include <vector>

#include "train_cuda/cuda_trainer_fixture.h"

namespace surogate::train {
namespace {

const std::map<std::string, std::string> kModes = {
    {"sharded", ""},
    {"persistent", "persistent_quants: true\n"},
    {"offloaded", "persistent_quants: true\noffload_quants: true\n"}};

class CudaQuantizedBaseTest : public CudaTrainerFixture {
protected:
  static int visible_gpus() {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
  }
  static TrainerOptions world_of_one() {
    TrainerOptions options = on(TrainingBackend::Cuda);
    options.data_parallel_device = true;
    options.gradient_bucket_bytes = 4096;
    return options;
  }
  static void expect_same_run(const std::string& name, const TrainingResult& reference, const TrainingResult& result) {
    ASSERT_EQ(result.step_losses.size(), reference.step_losses.size()) << name;
    for (size_t i = 0; i < reference.step_losses.size(); ++i) {
      EXPECT_EQ(result.step_losses[i], reference.step_losses[i]) << name << " step " << i + 1;
    }
    ASSERT_TRUE(reference.eval_loss && result.eval_loss) << name;
    EXPECT_EQ(*result.eval_loss, *reference.eval_loss) << name;
  }
  // `job` on the single-GPU device, then on the ZeRO-3 device of one GPU in each mode.
  static void expect_world_of_one_equals_single_gpu(const std::string& name, const std::string& job) {
    const std::string steps = "save_steps: 6\nmax_steps: 6\n";
    TrainingResult single = run_training(config(name + "-single", job + steps), on(TrainingBackend::Cuda));
    EXPECT_LT(single.step_losses.back(), single.step_losses.front()) << name;
    for (const auto& [mode, lines] : kModes) {
      const std::string run = name + "-" + mode;
      TrainingResult result = run_training(config(run, job + steps + "zero_level: 3\n" + lines), world_of_one());
      expect_same_run(run, single, result);
      for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
        expect_same_tensors(root_ / (name + "-single") / "checkpoint-6" / file, root_ / run / "checkpoint-6" / file);
      }
    }
  }
};

const std::string kLora = "optimizer: adamw\nlora: true\nlora_rank: 8\nlora_alpha: 16\nlora_dropout: 0.0\n"
                          "learning_rate: 1e-2\n";

TEST_F(CudaQuantizedBaseTest, QloraNf4OnAWorldOfOneEqualsTheSingleGpuDeviceInEveryMode) {
  expect_world_of_one_equals_single_gpu("nf4", kLora + "qlora_bnb: true\n");
}

TEST_F(CudaQuantizedBaseTest, QloraFp8BlocksOnAWorldOfOneEqualsTheSingleGpuDeviceInEveryMode) {
  expect_world_of_one_equals_single_gpu("fp8-blocks", kLora + "qlora_fp8: true\n");
}

TEST_F(CudaQuantizedBaseTest, Fp8HybridLoraOnAWorldOfOneEqualsTheSingleGpuDeviceInEveryMode) {
  expect_world_of_one_equals_single_gpu("fp8-hybrid", kLora + "recipe: fp8_hybrid\n");
}

TEST_F(CudaQuantizedBaseTest, OffloadQuantsOnOneGpuEqualsTheSingleGpuDevice) {
  const std::string job = kLora + "qlora_bnb: true\nsave_steps: 6\nmax_steps: 6\n";
  TrainingResult single = run_training(config("one-gpu-single", job), on(TrainingBackend::Cuda));
  TrainingResult offloaded = run_training(
      config("one-gpu-offloaded", job + "zero_level: 3\npersistent_quants: true\noffload_quants: true\n"),
      on(TrainingBackend::Cuda));
  expect_same_run("one-gpu-offloaded", single, offloaded);
  expect_same_tensors(root_ / "one-gpu-single" / "adapter_model.safetensors",
                      root_ / "one-gpu-offloaded" / "adapter_model.safetensors");
}

TEST_F(CudaQuantizedBaseTest, TwoGpusAgreeBitForBitInEveryModeAndMatchOneGpu) {
  if (visible_gpus() < 2) GTEST_SKIP() << "needs 2 GPUs, " << visible_gpus() << " visible";
  const std::string common = "max_steps: 20\n" + kLora + "qlora_bnb: true\n";
  TrainingResult one = run_training(config("dp1-quants", common + "gradient_accumulation_steps: 4\n"),
                                    on(TrainingBackend::Cuda));
  TrainerOptions buckets = on(TrainingBackend::Cuda);
  buckets.gradient_bucket_bytes = 4096;
  std::map<std::string, TrainingResult> results;
  for (const auto& [mode, lines] : kModes) {
    results[mode] = run_training(
        config("dp2-quants-" + mode, common + "gpus: 2\nzero_level: 3\ngradient_accumulation_steps: 2\n" + lines),
        buckets);
  }
  expect_tracks("gpus-2-zero-3-qlora", one, results.at("sharded"), 1e-5, 0.01, 0.005);
  for (const std::string mode : {"persistent", "offloaded"}) {
    expect_same_run("dp2-quants-" + mode, results.at("sharded"), results.at(mode));
    expect_same_tensors(root_ / "dp2-quants-sharded" / "adapter_model.safetensors",
                        root_ / ("dp2-quants-" + mode) / "adapter_model.safetensors");
  }
}

}  // namespace
}  // namespace surogate::train
