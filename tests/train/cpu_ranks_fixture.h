// What the CPU ranks' tests of data, sequence and pipeline parallelism share (CI runs them): on a
// machine with a GPU `gpus: N` asks for N GPUs, so they skip there; they force the CPU backend;
// and they compare safetensors outputs tensor by tensor.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "io/safetensors.h"
#include "train/device/backend_selection.h"
#include "trainer_fixture.h"

namespace surogate::train {

class CpuRanksFixture : public TrainerFixture {
protected:
  void SetUp() override {
    if (probe_machine().visible_gpus > 0) GTEST_SKIP() << "a GPU is visible: gpus: N means GPUs here";
  }
  static TrainerOptions cpu(bool pretraining = false) {
    TrainerOptions options = quiet(pretraining);
    options.backend = TrainingBackend::Cpu;
    return options;
  }
  // A fresh run folder `to` holding a copy of run `from`'s `checkpoint` (to resume elsewhere).
  void copy_checkpoint(const std::string& from, const std::string& to, const std::string& checkpoint) const {
    std::filesystem::remove_all(root_ / to);
    std::filesystem::create_directories(root_ / to);
    std::filesystem::copy(root_ / from / checkpoint, root_ / to / checkpoint, std::filesystem::copy_options::recursive);
  }
};

// `continued` resumed after step `from` of the run whose uninterrupted losses are `straight`'s:
// each later step's loss equal (relative 0) or within `relative` of it.
inline void expect_continues(const TrainingResult& continued, const TrainingResult& straight, size_t from,
                             double relative) {
  ASSERT_EQ(continued.first_step, from);
  ASSERT_EQ(continued.step_losses.size(), straight.step_losses.size() - from);
  for (size_t i = 0; i < continued.step_losses.size(); ++i) {
    const double expected = straight.step_losses[from + i];
    if (relative == 0.0) {
      EXPECT_EQ(continued.step_losses[i], expected) << "step " << from + i + 1;
    } else {
      EXPECT_NEAR(continued.step_losses[i], expected, relative * std::fabs(expected)) << "step " << from + i + 1;
    }
  }
}

// The largest |a − b| over the F32 tensors of two safetensors files that hold the same tensors.
inline double largest_f32_difference(const std::filesystem::path& a, const std::filesystem::path& b) {
  io::SafetensorsFile first = io::SafetensorsFile::open(a), second = io::SafetensorsFile::open(b);
  EXPECT_EQ(first.tensors().size(), second.tensors().size()) << a << " against " << b;
  double largest = 0.0;
  for (const io::SafetensorsTensor& tensor : first.tensors()) {
    const io::SafetensorsTensor& other = second.tensor(tensor.name);
    EXPECT_EQ(tensor.bytes.size(), other.bytes.size()) << tensor.name;
    std::vector<float> x(tensor.bytes.size() / sizeof(float)), y(x.size());
    std::memcpy(x.data(), tensor.bytes.data(), x.size() * sizeof(float));
    std::memcpy(y.data(), other.bytes.data(), std::min(other.bytes.size(), y.size() * sizeof(float)));
    for (size_t i = 0; i < x.size(); ++i) largest = std::max(largest, std::fabs(static_cast<double>(x[i]) - y[i]));
  }
  return largest;
}

}  // namespace surogate::train
