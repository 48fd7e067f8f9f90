// fp16 training (torch_dtype: float16) on the CUDA backend: the F16 plan (fp16 weights,
// activations and gradients; fp32 masters, accumulators and optimizer; dynamic loss scaling)
// against the CPU backend's fp16 emulation of the same job, full fine-tuning and LoRA; an
// overflowing loss scale skipped and halved without a non-finite weight, as on the CPU
// (tests/train/test_trainer_fp16.cpp); an exact resume; and the device's fp16 kernels bit for bit.
//
// Tolerances of the tracking tests: the fixture's (cuda_trainer_fixture.h: step 1 < 0.01 nats,
// every step < 0.03, mean of the last 5 < 0.02, the loss falls by 0.3+). Both runs hold the same
// tensors in fp16 (the emulation rounds exactly where the GPU graph is 16-bit), so they differ
// only by where the GPU kernels round internally, by summation order and by the fp16 weights
// written from the masters on the GPU; the bf16-vs-fp32 runs those bounds were set for differ by
// every bf16 rounding (8x coarser), so fp16 stays well within them. Both runs must skip the same
// number of steps for the loss scale (0 at the default 65536 on this job: the CPU fp16 test).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <cuda_fp16.h>
#include <nlohmann/json.hpp>

#include "core/bfloat16.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/gradient_accumulate.h"
#include "cuda/kernels/weights_from_masters.h"
#include "io/safetensors.h"
#include "train/checkpoint_store.h"
#include "train/training_state.h"
#include "train/fp16_checks.h"
#include "train_cuda/cuda_trainer_fixture.h"

namespace surogate::train {
namespace {
namespace fs = std::filesystem;

class CudaFp16Test : public CudaTrainerFixture {
protected:
  static nlohmann::json history(const std::string& name) { return fp16_step_history(root_ / name); }
  // `extra` with torch_dtype: float16 on both backends: the CUDA run tracks the CPU emulation.
  static void expect_fp16_tracks_cpu(const std::string& name, const std::string& extra) {
    const std::string fp16 = extra + "torch_dtype: float16\n";
    TrainingResult cpu = run_training(config(name + "-cpu", fp16), on(TrainingBackend::Cpu));
    TrainingResult cuda = run_training(config(name + "-cuda", fp16), on(TrainingBackend::Cuda));
    EXPECT_EQ(cuda.skipped_steps, cpu.skipped_steps) << name;
    expect_tracks(name, cpu, cuda, kFirstStepTolerance, kStepTolerance, kLastStepsMeanTolerance);
  }
};

TEST_F(CudaFp16Test, FullFineTuningTracksTheCpuEmulation) {
  expect_fp16_tracks_cpu("fp16-full", "max_steps: 20\noptimizer: adamw\n");
  expect_fp16_tracks_cpu("fp16-full-8bit", "max_steps: 20\noptimizer: adamw_8bit\n");
}

TEST_F(CudaFp16Test, LoraTracksTheCpuEmulation) {
  // LoraTracksTheCpuRun's job (lr 1e-2: not chaotic).
  expect_fp16_tracks_cpu("fp16-lora", "max_steps: 20\nlora: true\nlora_rank: 8\nlora_alpha: 16\nlora_dropout: 0.0\n"
                                      "learning_rate: 1e-2\n");
}

// The CPU test's job on CUDA: a loss scale of 2^40 overflows the fp16 gradients (the fp32
// accumulators hold ±inf / NaN, so the norm is not finite): those steps are skipped and the scale
// halves each time; the first step overflows; no checkpoint holds a non-finite weight (a skipped
// step applies nothing, and the fp16 weights are rewritten from finite masters only); the run then
// trains (its loss falls by 0.3+ after the first applied step).
TEST_F(CudaFp16Test, AnOverflowingLossScaleSkipsAndHalvesWithoutANonFiniteWeight) {
  TrainingResult result = run_training(
      config("fp16-overflow", "max_steps: 40\nsave_steps: 1\nsave_total_limit: 100\ntorch_dtype: float16\n"
                              "fp16_loss_scale: 1099511627776\n"),
      on(TrainingBackend::Cuda));
  expect_overflow_backs_off(root_ / "fp16-overflow", result, 1099511627776.0);
}

// The masters and moments are in the checkpoint, the fp16 weights are rounded from the masters
// the same way on upload as after each step, and the loss scale's state is restored: exact.
TEST_F(CudaFp16Test, ResumesExactly) {
  expect_exact_resume("fp16-resume", "torch_dtype: float16\nfp16_loss_scale: 8388608\nfp16_loss_scale_window: 3\n");
}

// The training device's fp16 kernels, exactly: accumulate_fp16_gradients adds fp16 gradients into
// fp32 accumulators (fp32 sums) and zeroes them; weights_from_masters rounds fp32 masters to fp16
// to nearest even, values past 65504 to ±inf (65520 and up), as the host's float_to_f16 (the CPU
// emulation's round_fp16) does. Random values over fp16's range, plus the edges.
TEST(Fp16TrainingKernels, AccumulationAndWeightsFromMastersRoundAsTheHost) {
  std::string reason;
  if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> exponent(-26.0f, 17.0f);
  for (const size_t count : {size_t{1}, size_t{7}, size_t{4096}, size_t{100003}}) {
    std::vector<float> masters(count), accumulators(count);
    std::vector<uint16_t> gradient_bits(count);
    for (size_t i = 0; i < count; ++i) {
      const float sign = rng() % 2 ? 1.0f : -1.0f;
      masters[i] = sign * std::exp2(exponent(rng));
      accumulators[i] = sign * std::exp2(exponent(rng) - 8.0f);
      gradient_bits[i] = float_to_f16(-sign * std::exp2(exponent(rng)));
    }
    const float edges[] = {65504.0f, 65519.0f, 65520.0f, -70000.0f, 5.96e-8f, 2.9e-8f, 0.0f, -0.0f};
    for (size_t i = 0; i < std::size(edges) && i < count; ++i) masters[i] = edges[i];

    cuda::DeviceBuffer<float> device_masters = cuda::to_device(masters);
    cuda::DeviceBuffer<float> device_accumulators = cuda::to_device(accumulators);
    cuda::DeviceBuffer<uint16_t> device_gradients = cuda::to_device(gradient_bits);
    cuda::DeviceBuffer<uint16_t> device_weights(count);
    device_weights.poison();
    std::vector<__half*> weight_table{reinterpret_cast<__half*>(device_weights.data())};
    std::vector<__half*> gradient_table{reinterpret_cast<__half*>(device_gradients.data())};
    std::vector<const float*> master_table{device_masters.data()};
    std::vector<float*> accumulator_table{device_accumulators.data()};
    std::vector<int64_t> counts{static_cast<int64_t>(count)};
    auto weights_on_device = cuda::to_device(weight_table);
    auto gradients_on_device = cuda::to_device(gradient_table);
    auto masters_on_device = cuda::to_device(master_table);
    auto accumulators_on_device = cuda::to_device(accumulator_table);
    auto counts_on_device = cuda::to_device(counts);
    cuda::weights_from_masters(weights_on_device.data(), masters_on_device.data(),
                                              counts_on_device.data(), 1, nullptr);
    cuda::accumulate_fp16_gradients(gradients_on_device.data(), accumulators_on_device.data(),
                                            cuda::GradientCounts(counts), 0, 1, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint16_t> weights = device_weights.download();
    const std::vector<float> sums = device_accumulators.download();
    const std::vector<uint16_t> zeroed = device_gradients.download();
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(weights[i], float_to_f16(masters[i])) << "master " << masters[i] << " at " << i;
      ASSERT_EQ(sums[i], accumulators[i] + f16_to_float(gradient_bits[i])) << i;
      ASSERT_EQ(zeroed[i], 0u) << i;
    }
  }
}

}  // namespace
}  // namespace surogate::train
