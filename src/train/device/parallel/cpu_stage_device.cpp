// A pipeline stage's plans on a CPU rank; see cpu_stage_device.h.
#include "train/device/parallel/cpu_stage_device.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "core/error.h"

namespace surogate::train {

CpuStageDevice::CpuStageDevice(const PipelineStagePlan& plan, const graph::OpRegistry& registry,
                               StageBoundary boundary)
    : plan_(plan), boundary_(std::move(boundary)) {
  const compiler::ExecutionPlan& training = plan_.training;
  training_.load(training, registry);
  if (last()) return;
  const compiler::ExecutionPlan& forward = plan_.forward;
  forward_.load(forward, registry);
  for (const graph::TensorType& type : boundary_.sent_types) gradients_.emplace_back(type.numel());
  // The fp32 weights both plans hold (QLoRA's quantized pieces are frozen: store_quantized writes
  // them into both); the trainable ones change with every update.
  for (graph::TensorId id : forward.graph.parameters) {
    const graph::TensorInfo& info = forward.graph.tensor(id);
    if (info.type.dtype != DType::F32) continue;
    const graph::TensorId in_training = training.tensor(info.name);
    (training.parameter_gradients.contains(in_training) ? trained_weights_ : frozen_weights_).emplace_back(in_training, id);
  }
}

void CpuStageDevice::refresh_forward_weights(bool trained_only) {
  if (last()) return;
  for (const auto* weights : {&trained_weights_, &frozen_weights_}) {
    if (trained_only && weights == &frozen_weights_) continue;
    for (const auto& [training, forward] : *weights) {
      const std::span<float> from = training_.view<float>(training);
      std::ranges::copy(from, forward_.view<float>(forward).begin());
    }
  }
}

void CpuStageDevice::write_weight(const std::string& name, std::span<const std::byte> bytes) {
  if (auto id = plan_.training.graph.find_tensor(name)) training_.write(*id, bytes);
  if (last()) return;
  if (auto id = plan_.forward.graph.find_tensor(name)) forward_.write(*id, bytes);
}

void* CpuStageDevice::allocate(size_t bytes) {
  return buffers_.emplace_back(std::make_unique<std::byte[]>(bytes)).get();
}

void CpuStageDevice::run_forward(const StageMicroBatch& batch, std::span<void* const> received) {
  std::vector<runtime::InputBinding> bindings = batch.forward.bindings();
  for (size_t k = 0; k < received.size(); ++k) {
    const std::byte* data = static_cast<const std::byte*>(received[k]);
    bindings.push_back({boundary_.received_forward[k], {data, boundary_.received_types[k].size_bytes()}});
  }
  forward_.execute(bindings);
}

void CpuStageDevice::run_training(const StageMicroBatch& batch) {
  std::vector<runtime::InputBinding> bindings = batch.training.bindings();
  for (size_t k = 0; k < gradients_.size(); ++k) {
    bindings.push_back({boundary_.sent_gradient_inputs[k], std::as_bytes(std::span<const float>(gradients_[k]))});
  }
  training_.execute(bindings);
  if (last()) loss_ += training_.view<float>(plan_.training.loss)[0];
}

void CpuStageDevice::copy(void* destination, const void* source, size_t bytes) {
  std::memcpy(destination, source, bytes);
}

// The CPU's plans are fp32.
void CpuStageDevice::add(void* destination, const void* source, const graph::TensorType& type) {
  SUROGATE_CHECK(type.dtype == DType::F32, "a CPU stage's boundary tensors are fp32");
  float* sum = static_cast<float*>(destination);
  const float* more = static_cast<const float*>(source);
  std::transform(sum, sum + type.numel(), more, sum, std::plus<>());
}

void CpuStageDevice::zero(void* destination, size_t bytes) { std::memset(destination, 0, bytes); }

const void* CpuStageDevice::outgoing(const void* data, size_t bytes) {
  const std::byte* from = static_cast<const std::byte*>(data);
  return outgoing_.emplace_back(from, from + bytes).data();
}

}  // namespace surogate::train
