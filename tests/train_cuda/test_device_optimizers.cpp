// The device optimizers (train/device/device_*.cpp) against the CPU optimizers of the same name
// (train/optim/), the oracle: the same parameters and gradients for 6 steps, then the fp32
// masters, the bf16 weights and the state tensors compared. The parameters cover a wide and a
// tall hidden matrix (NorMuon's two Newton–Schulz orientations; several 2048-element 8-bit
// blocks, the last one partial), each twice (NorMuon updates same-shape matrices as one batched
// group; one of the pair without weight decay) and a 1-D norm weight (no weight decay; AdamW
// under NorMuon).
// The device gradients are scaled by a device clip factor of 0.5; the CPU ones are scaled by
// 0.5 beforehand (exact in fp32), as the CPU trainer clips.
//
// Tolerances:
//   adamw:      masters within 2e-6 and moments within 1e-6 (relative to max(1, |value|)). The
//               two kernels differ only in rounding (the device applies decay as w·(1 − lr·wd)).
//   adamw_8bit: written with explicit round-to-nearest operations in the CPU's order, so codes
//               are expected identical; a value that lands within an ulp of a midpoint between
//               two codes may still round the other way, so at most 0.1% of the codes may differ
//               and at most 0.1% of the masters may be further than 1e-6 apart, all within 5e-4
//               (what one code step of a moment can move a weight at lr 1e-2 in the steps left).
//   normuon:    cuBLAS and OpenBLAS sum the Newton–Schulz products in different orders (relative
//               differences ~1e-6); masters within 2e-6, momentum within 1e-6, second moments
//               within 1e-5 relative. With cautious weight decay, an update within rounding of
//               zero may flip the decay mask, so that case is checked like adamw_8bit (0.1% may
//               exceed 2e-6, all within lr·wd·max|w| = 5e-3).
//   bf16 weights: equal to bf16(master) of the device's own master (round to nearest even).
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/bfloat16.h"
#include "cuda/device_buffer.h"
#include "cuda/device_info.h"
#include "train/device/device_optimizer.h"
#include "train_cuda/optimizer_test_shapes.h"
#include "train/optim/optimizer.h"

namespace surogate::train {
namespace {

constexpr float kClip = 0.5f;
constexpr double kLearningRate = 1e-2;

using Shape = OptimizerTestShape;
const std::vector<Shape>& shapes() { return optimizer_test_shapes(); }

std::vector<float> random_vector(size_t size, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(size);
  for (float& value : values) value = normal(rng);
  return values;
}

struct Tolerance {
  double tight;            // most elements within this (relative to max(1, |expected|))
  double outlier_fraction; // at most this fraction beyond `tight`
  double loose;            // every element within this
};

void expect_close(const std::string& what, const float* got, const float* want, size_t count, Tolerance tolerance) {
  size_t outliers = 0;
  double worst = 0.0;
  for (size_t i = 0; i < count; ++i) {
    const double delta = std::abs(double(got[i]) - want[i]) / std::max(1.0, std::abs(double(want[i])));
    worst = std::max(worst, delta);
    if (!(delta <= tolerance.tight)) ++outliers;
    ASSERT_LE(delta, tolerance.loose) << what << " element " << i << ": " << got[i] << " vs " << want[i];
  }
  std::printf("%s: max |delta| %.3g, %zu of %zu beyond %.0e\n", what.c_str(), worst, outliers, count, tolerance.tight);
  EXPECT_LE(double(outliers), tolerance.outlier_fraction * double(count)) << what;
}

// Runs the optimizer on both sides for 6 steps and compares.
void compare(surogate::Optimizer which, double weight_decay, bool cautious, Tolerance master_tolerance,
             Tolerance state_tolerance) {
  std::string reason;
  if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  Config config;
  config.optimizer.algorithm = which;
  config.optimizer.normuon_cautious_wd = cautious;
  AdamWSettings adamw{config.optimizer.adamw_beta1, config.optimizer.adamw_beta2, config.optimizer.adamw_epsilon};

  std::vector<std::vector<float>> host_masters, host_gradients(shapes().size());
  std::vector<ParameterSlot> slots;
  std::vector<cuda::DeviceBuffer<float>> masters, gradients;
  std::vector<cuda::DeviceBuffer<__nv_bfloat16>> weights;
  std::vector<DeviceParameter> parameters;
  for (size_t i = 0; i < shapes().size(); ++i) {
    const Shape& shape = shapes()[i];
    const size_t size = static_cast<size_t>(shape.rows * shape.cols);
    host_masters.push_back(random_vector(size, 100 + static_cast<uint32_t>(i), 1.0f));
    host_gradients[i].resize(size);
    masters.push_back(cuda::to_device(host_masters.back()));
    gradients.emplace_back(size);
    weights.emplace_back(size);
    slots.push_back({shape.name, host_masters.back().data(), host_gradients[i].data(), shape.rows, shape.cols,
                     shape.decay, shape.hidden});
    DeviceParameter parameter;
    parameter.name = shape.name;
    parameter.rows = shape.rows;
    parameter.cols = shape.cols;
    parameter.weight = weights.back().data();
    parameter.master = masters.back().data();
    parameter.gradient = gradients.back().data();
    parameter.apply_weight_decay = shape.decay;
    parameter.is_hidden_matrix = shape.hidden;
    parameters.push_back(parameter);
  }
  std::unique_ptr<train::Optimizer> cpu;
  switch (which) {
    case surogate::Optimizer::AdamW: cpu = make_adamw(slots, adamw); break;
    case surogate::Optimizer::AdamW8bit: cpu = make_adamw_8bit(slots, adamw); break;
    case surogate::Optimizer::NorMuon:
      cpu = make_normuon(slots, {config.optimizer.normuon_momentum, config.optimizer.normuon_beta2, cautious, adamw});
      break;
  }
  std::unique_ptr<DeviceOptimizer> device =
      make_device_optimizer(config.optimizer, static_cast<uint64_t>(config.data.train_seed), parameters);
  ASSERT_EQ(device->name(), cpu->name());
  device->upload(nullptr);
  cuda::DeviceBuffer<float> clip = cuda::to_device(std::vector<float>{kClip});

  for (int step = 0; step < 6; ++step) {
    for (size_t i = 0; i < shapes().size(); ++i) {
      std::vector<float> gradient = random_vector(host_gradients[i].size(), 1000 + 10 * step + i, 0.05f);
      gradients[i].upload(gradient);
      for (size_t k = 0; k < gradient.size(); ++k) host_gradients[i][k] = gradient[k] * kClip;
    }
    const OptimizerStep optimizer_step{step, kLearningRate, weight_decay};
    device->step(optimizer_step, clip.data(), nullptr);
    cpu->step(slots, optimizer_step);
  }
  device->download(nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());

  for (size_t i = 0; i < shapes().size(); ++i) {
    std::vector<float> got = masters[i].download();
    expect_close(shapes()[i].name + " master", got.data(), host_masters[i].data(), got.size(), master_tolerance);
    std::vector<__nv_bfloat16> bf16 = weights[i].download();
    for (size_t k = 0; k < got.size(); ++k) {
      uint16_t bits;
      std::memcpy(&bits, &bf16[k], sizeof(bits));
      ASSERT_EQ(bits, float_to_bf16(got[k])) << shapes()[i].name << " bf16 weight " << k;
    }
  }
  std::vector<StateTensor> device_state = device->state_tensors(), cpu_state = cpu->state_tensors();
  ASSERT_EQ(device_state.size(), cpu_state.size());
  for (size_t t = 0; t < cpu_state.size(); ++t) {
    const StateTensor& got = device_state[t];
    const StateTensor& want = cpu_state[t];
    ASSERT_EQ(got.name, want.name);
    ASSERT_EQ(got.dtype, want.dtype) << want.name;
    ASSERT_EQ(got.shape, want.shape) << want.name;
    ASSERT_EQ(got.size_bytes, want.size_bytes) << want.name;
    if (want.dtype == DType::U8) {
      const auto* a = static_cast<const uint8_t*>(got.data);
      const auto* b = static_cast<const uint8_t*>(want.data);
      size_t differing = 0;
      for (size_t k = 0; k < want.size_bytes; ++k) differing += a[k] != b[k];
      std::printf("%s: %zu of %zu codes differ\n", want.name.c_str(), differing, want.size_bytes);
      EXPECT_LE(double(differing), state_tolerance.outlier_fraction * double(want.size_bytes)) << want.name;
    } else {
      expect_close(want.name, static_cast<const float*>(got.data), static_cast<const float*>(want.data),
                   want.size_bytes / sizeof(float), state_tolerance);
    }
  }
}

TEST(DeviceOptimizers, AdamWMatchesTheCpuAdamW) {
  compare(surogate::Optimizer::AdamW, 0.1, false, {2e-6, 0.0, 2e-6}, {1e-6, 0.0, 1e-6});
}

TEST(DeviceOptimizers, AdamW8bitMatchesTheCpuAdamW8bit) {
  compare(surogate::Optimizer::AdamW8bit, 0.1, false, {1e-6, 1e-3, 5e-4}, {1e-6, 1e-3, 1e-2});
}

TEST(DeviceOptimizers, NorMuonMatchesTheCpuNorMuon) {
  compare(surogate::Optimizer::NorMuon, 0.0, false, {2e-6, 0.0, 2e-6}, {1e-5, 0.0, 1e-5});
}

TEST(DeviceOptimizers, NorMuonWithCautiousWeightDecayMatchesTheCpuNorMuon) {
  compare(surogate::Optimizer::NorMuon, 0.1, true, {2e-6, 1e-3, 5e-3}, {1e-5, 0.0, 1e-5});
}

}  // namespace
}  // namespace surogate::train
