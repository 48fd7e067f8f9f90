// The training device's gradient accumulation (cuda/kernels/gradient_accumulate.h) against the host,
// exactly: for tensors [first, end) of a table, accumulator += float(gradient) (fp32, or the fp32
// sum rounded to nearest bf16) and the gradient zeroed; the tensors outside the range untouched.
// The table mixes sizes around the 4096-element chunk (empty, 1, 3, 4095, 4096, 4097, a few
// chunks and a remainder), tensors that start on an odd element (the element-by-element path,
// as a ZeRO-2 staging slot's parts may) and a large one, so every chunk-to-tensor lookup and
// both paths run. Random values drawn fresh each run. With `overwrite` (the first micro-batch of
// a step under deferred zeroing) the accumulators start as NaN and must come out as 0 + gradient,
// the bits adding into zeros gives: a gradient of −0 leaves +0, as it does in zeroed memory.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <cuda_bf16.h>

#include "core/bfloat16.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/device_info.h"
#include "cuda/kernels/gradient_accumulate.h"

namespace surogate::train {
namespace {

struct Table {
  std::vector<int64_t> counts = {0, 1, 3, 4095, 4096, 4097, 3 * 4096 + 5, 0, 7, 1000003, 129, 2048};
  std::vector<int64_t> offsets;  // element offsets into one buffer; odd ones for some tensors
  int64_t total = 0;
  Table() {
    for (size_t t = 0; t < counts.size(); ++t) {
      total += t % 3 == 2 ? 1 : 8;  // an odd start every third tensor
      offsets.push_back(total);
      total += counts[t];
    }
    total += 8;
  }
};

template <typename Accumulator>
void check_accumulation(size_t first, size_t end, bool overwrite = false) {
  const Table table;
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> gradients(static_cast<size_t>(table.total));
  std::vector<float> accumulators(static_cast<size_t>(table.total));
  for (size_t i = 0; i < gradients.size(); ++i) {
    gradients[i] = float_to_bf16(normal(rng));
    accumulators[i] = normal(rng) * 4.0f;
    if constexpr (sizeof(Accumulator) == 2) accumulators[i] = bf16_to_float(float_to_bf16(accumulators[i]));
    if (i % 97 == 5) gradients[i] = 0x8000;  // −0
  }
  std::vector<uint16_t> accumulator_bits(accumulators.size());
  for (size_t i = 0; i < accumulators.size(); ++i) accumulator_bits[i] = float_to_bf16(accumulators[i]);
  if (overwrite) {  // never read: NaN everywhere, and a sum with NaN would show
    accumulators.assign(accumulators.size(), std::numeric_limits<float>::quiet_NaN());
    accumulator_bits.assign(accumulator_bits.size(), 0xFFFF);
  }

  cuda::DeviceBuffer<uint16_t> device_gradients = cuda::to_device(gradients);
  cuda::DeviceBuffer<float> device_floats = cuda::to_device(accumulators);
  cuda::DeviceBuffer<uint16_t> device_bf16s = cuda::to_device(accumulator_bits);
  std::vector<__nv_bfloat16*> gradient_table;
  std::vector<Accumulator*> accumulator_table;
  for (int64_t offset : table.offsets) {
    gradient_table.push_back(reinterpret_cast<__nv_bfloat16*>(device_gradients.data()) + offset);
    if constexpr (sizeof(Accumulator) == 4) accumulator_table.push_back(device_floats.data() + offset);
    else accumulator_table.push_back(reinterpret_cast<__nv_bfloat16*>(device_bf16s.data()) + offset);
  }
  auto gradients_on_device = cuda::to_device(gradient_table);
  auto accumulators_on_device = cuda::to_device(accumulator_table);
  const cuda::GradientCounts counts(table.counts);
  cuda::accumulate_bf16_gradients(gradients_on_device.data(), accumulators_on_device.data(), counts, first, end,
                                          nullptr, overwrite);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> zeroed = device_gradients.download();
  const std::vector<float> floats = device_floats.download();
  const std::vector<uint16_t> bf16s = device_bf16s.download();

  std::vector<bool> in_range(gradients.size(), false);
  for (size_t t = first; t < end; ++t) {
    for (int64_t i = 0; i < table.counts[t]; ++i) in_range[static_cast<size_t>(table.offsets[t] + i)] = true;
  }
  for (size_t i = 0; i < gradients.size(); ++i) {
    const float sum = (overwrite ? 0.0f : accumulators[i]) + bf16_to_float(gradients[i]);
    if (!in_range[i]) {  // another tensor's, or padding: as it was
      ASSERT_EQ(zeroed[i], gradients[i]) << i;
      if constexpr (sizeof(Accumulator) == 4) ASSERT_EQ(std::bit_cast<uint32_t>(floats[i]), std::bit_cast<uint32_t>(accumulators[i])) << i;
      else ASSERT_EQ(bf16s[i], accumulator_bits[i]) << i;
      continue;
    }
    ASSERT_EQ(zeroed[i], 0u) << i;
    if constexpr (sizeof(Accumulator) == 4) ASSERT_EQ(std::bit_cast<uint32_t>(floats[i]), std::bit_cast<uint32_t>(sum)) << i;
    else ASSERT_EQ(bf16s[i], float_to_bf16(sum)) << i;
  }
}

class GradientAccumulateCuda : public ::testing::Test {
protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  }
};

TEST_F(GradientAccumulateCuda, Fp32AccumulatorsOfEveryTensorEqualTheHostSums) { check_accumulation<float>(0, 12); }

TEST_F(GradientAccumulateCuda, Bf16AccumulatorsOfEveryTensorEqualTheHostSumsRounded) {
  check_accumulation<__nv_bfloat16>(0, 12);
}

TEST_F(GradientAccumulateCuda, OverwritingNeverReadsTheAccumulators) {
  check_accumulation<float>(0, 12, true);
  check_accumulation<__nv_bfloat16>(0, 12, true);
  check_accumulation<float>(2, 10, true);  // and leaves the tensors outside the range alone
}

TEST_F(GradientAccumulateCuda, ARangeOfTheTableLeavesTheOtherTensorsAlone) {
  check_accumulation<float>(2, 10);  // from an odd-start tensor to the large one's predecessor
  check_accumulation<__nv_bfloat16>(4, 5);
  check_accumulation<float>(7, 8);  // an empty tensor alone: no chunks, no launch
}

}  // namespace
}  // namespace surogate::train
