// recipe fp8_hybrid through the trainer on the CUDA backend (cuBLASLt FP8 products, the FP8 copies
// of trained weights rewritten once per optimizer step by cuda::fp8_quantize_weight) against the
// CPU backend's exact emulation of the recipe (fp32 activations, the same quantization rules), on
// the quickstart model; and use_fused_rope against the CPU run.
//
// Tolerances: the fixture's CPU-vs-CUDA ones (step 1 within 0.01 nats, every step within 0.03
// over 20 steps, the mean over the last 5 within 0.02, the loss falling by 0.3+). The quantized
// tensors are the same function of slightly different inputs (bf16 vs fp32 activations), so a
// code flips where an input sits within bf16's error of an E4M3 rounding boundary; each flip moves
// one element by an E4M3 step, and the products average them out. Not yet measured on a GPU.
//   resume: a resumed fp8_hybrid full fine-tuning run equals the uninterrupted one exactly (the
//           scaling state and the masters are restored bit for bit, and the FP8 copies are made
//           from the restored weights on upload);
//   fp8_hybrid vs bf16 on the GPU: every step within 0.03 nats, the last 5 within 0.02 (the
//           recipe's numerics; the CPU tests/python/test_fp8_cli.py bounds the emulation against
//           fp32 at 1-2 % per step).
#include <gtest/gtest.h>

#include <string>

#include "train_cuda/cuda_trainer_fixture.h"

namespace surogate::train {
namespace {

class CudaFp8TrainingTest : public CudaTrainerFixture {};

TEST_F(CudaFp8TrainingTest, FullFineTuningTracksTheCpuEmulation) {
  expect_tracks_cpu("fp8-full", "max_steps: 20\nrecipe: fp8_hybrid\n");
}

TEST_F(CudaFp8TrainingTest, LoraTracksTheCpuEmulation) {
  expect_tracks_cpu("fp8-lora", "max_steps: 20\nrecipe: fp8_hybrid\nlora: true\nlora_rank: 8\nlora_alpha: 16\n"
                                "lora_dropout: 0.0\nlearning_rate: 1e-2\n");
}

TEST_F(CudaFp8TrainingTest, QloraTracksTheCpuEmulation) {
  expect_tracks_cpu("fp8-qlora", "max_steps: 20\nrecipe: fp8_hybrid\nlora: true\nlora_rank: 8\nlora_alpha: 16\n"
                                 "lora_dropout: 0.0\nlearning_rate: 1e-2\nqlora_bnb: true\n");
}

TEST_F(CudaFp8TrainingTest, FullFineTuningTracksTheBf16Run) {
  const std::string extra = "max_steps: 20\n";
  TrainingResult bf16 = run_training(config("fp8-vs-bf16-bf16", extra), on(TrainingBackend::Cuda));
  TrainingResult fp8 = run_training(config("fp8-vs-bf16-fp8", extra + "recipe: fp8_hybrid\n"), on(TrainingBackend::Cuda));
  expect_tracks("fp8-vs-bf16", bf16, fp8, kFirstStepTolerance, kStepTolerance, kLastStepsMeanTolerance);
}

TEST_F(CudaFp8TrainingTest, FullFineTuningResumesExactly) {
  expect_exact_resume("fp8-full-resume", "recipe: fp8_hybrid\noptimizer: adamw_8bit\n");
}

TEST_F(CudaFp8TrainingTest, FusedRopeTracksTheCpuRun) {
  expect_tracks_cpu("fused-rope", "max_steps: 20\nuse_fused_rope: true\n");
}

}  // namespace
}  // namespace surogate::train
