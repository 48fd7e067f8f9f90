// A pipeline stage's plans on a CPU rank (stage_device.h; the algorithm is pipeline_stage.h): the
// stage's training plan on one CpuBackend (its parameters are the rank's masters, its gradients the
// ones the optimizer reads) and, on every stage but the last, its forward plan on a second
// CpuBackend whose weights are copies (refresh_forward_weights after every change). The forward
// plan reads the received tensors as bound inputs, the training plan the sent tensors' gradients;
// everything runs at once on the rank's thread, so a send's data is copied until the step's sends
// completed (the next run overwrites the plan's outputs).
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "graph/op_registry.h"
#include "runtime/cpu_backend.h"
#include "train/device/parallel/stage_device.h"

namespace surogate::train {

class CpuStageDevice final : public StageDevice {
public:
  // `plan` (the stage's) must outlive the device.
  CpuStageDevice(const PipelineStagePlan& plan, const graph::OpRegistry& registry, StageBoundary boundary);

  runtime::CpuBackend& training() { return training_; }
  // The forward plan's weights ← the training plan's: every fp32 weight (after loading or a
  // resume), or only the trained ones (after an update).
  void refresh_forward_weights(bool trained_only);
  // Writes a weight the stage's plans hold (both backends; nothing when they hold none).
  void write_weight(const std::string& name, std::span<const std::byte> bytes);

  void* allocate(size_t bytes) override;
  void run_forward(const StageMicroBatch& batch, std::span<void* const> received) override;
  const void* sent(size_t k) override { return forward_.view<float>(boundary_.sent_forward[k]).data(); }
  void* sent_gradient(size_t k) override { return gradients_[k].data(); }
  void* received_parameter(size_t k) override { return training_.view<float>(boundary_.received_training[k]).data(); }
  void* received_gradient(size_t k) override { return training_.view<float>(boundary_.received_gradients[k]).data(); }
  void run_training(const StageMicroBatch& batch) override;
  void copy(void* destination, const void* source, size_t bytes) override;
  void add(void* destination, const void* source, const graph::TensorType& type) override;
  void zero(void* destination, size_t bytes) override;
  const void* outgoing(const void* data, size_t bytes) override;
  void sends_done() override { outgoing_.clear(); }
  double loss() override { return std::exchange(loss_, 0.0); }
  void refresh_weights() override { refresh_forward_weights(true); }

private:
  bool last() const { return plan_.graph.sent.empty(); }

  const PipelineStagePlan& plan_;
  StageBoundary boundary_;
  runtime::CpuBackend training_;
  runtime::CpuBackend forward_;  // every stage but the last
  // Weights both plans hold, (training id, forward id): trained, and frozen fp32 ones.
  std::vector<std::pair<graph::TensorId, graph::TensorId>> trained_weights_, frozen_weights_;
  std::vector<std::vector<float>> gradients_;  // the summed gradients of the sent tensors (one micro-batch)
  std::vector<std::unique_ptr<std::byte[]>> buffers_;  // allocate()'s
  std::deque<std::vector<std::byte>> outgoing_;       // the step's sends' data
  double loss_ = 0.0;                                  // the last stage's, since loss()
};

}  // namespace surogate::train
