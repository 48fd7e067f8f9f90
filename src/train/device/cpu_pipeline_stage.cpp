// One pipeline stage on a CPU rank; see cpu_pipeline_stage.h.
#include "train/device/cpu_pipeline_stage.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "distributed/pipeline_schedule.h"

namespace surogate::train {
namespace {

std::vector<float> values_of(runtime::CpuBackend& backend, graph::TensorId id) {
  const std::span<float> view = backend.view<float>(id);
  return {view.begin(), view.end()};
}

}  // namespace

CpuPipelineStage::CpuPipelineStage(const PipelineStagePlan& plan, const graph::OpRegistry& registry, int stages,
                                   const std::map<std::string, uint32_t>& boundary_tags)
    : plan_(plan), stages_(stages), boundary_tags_(boundary_tags) {
  const compiler::ExecutionPlan& training = plan_.training;
  training_.load(training, registry);
  for (const distributed::BoundaryTensor& tensor : plan_.graph.received) {
    const graph::TensorId id = training.tensor(tensor.name);
    received_training_.push_back(id);
    received_gradients_.push_back(training.parameter_gradients.at(id));
  }
  if (last()) return;
  const compiler::ExecutionPlan& forward = plan_.forward;
  forward_.load(forward, registry);
  for (const distributed::BoundaryTensor& tensor : plan_.graph.received) received_forward_.push_back(forward.tensor(tensor.name));
  for (const distributed::BoundaryTensor& tensor : plan_.graph.sent) {
    sent_forward_.push_back(forward.tensor(tensor.name));
    sent_gradient_inputs_.push_back(training.tensor(tensor.name + distributed::kPipelineGradSuffix));
    gradients_.emplace_back(forward.graph.tensor(sent_forward_.back()).type.numel());
  }
  // The fp32 weights both plans hold (QLoRA's quantized pieces are frozen: store_quantized writes
  // them into both); the trainable ones change with every update.
  for (graph::TensorId id : forward.graph.parameters) {
    const graph::TensorInfo& info = forward.graph.tensor(id);
    if (info.type.dtype != DType::F32) continue;
    const graph::TensorId in_training = training.tensor(info.name);
    (training.parameter_gradients.contains(in_training) ? trained_weights_ : frozen_weights_).emplace_back(in_training, id);
  }
}

StageMicroBatch CpuPipelineStage::take(const compiler::ExecutionPlan& source,
                                       std::span<const runtime::InputBinding> inputs, int sequence,
                                       int sequence_ranks) const {
  return take_stage_micro_batch(plan_, source, inputs, sequence, sequence_ranks);
}

void CpuPipelineStage::refresh_forward_weights(bool trained_only) {
  if (last()) return;
  for (const auto* weights : {&trained_weights_, &frozen_weights_}) {
    if (trained_only && weights == &frozen_weights_) continue;
    for (const auto& [training, forward] : *weights) {
      const std::span<float> from = training_.view<float>(training);
      std::ranges::copy(from, forward_.view<float>(forward).begin());
    }
  }
}

void CpuPipelineStage::write_weight(const std::string& name, std::span<const std::byte> bytes) {
  if (auto id = plan_.training.graph.find_tensor(name)) training_.write(*id, bytes);
  if (last()) return;
  if (auto id = plan_.forward.graph.find_tensor(name)) forward_.write(*id, bytes);
}

uint32_t CpuPipelineStage::tag(int micro_batch, bool gradient, const std::string& tensor) const {
  const auto tensors = static_cast<uint32_t>(boundary_tags_.size());
  return (static_cast<uint32_t>(micro_batch) * 2 + (gradient ? 1 : 0)) * tensors + boundary_tags_.at(tensor);
}

double CpuPipelineStage::run(std::span<const StageMicroBatch> batches, distributed::Communicator& world,
                             const std::function<int(int)>& peer) {
  const auto count = static_cast<int>(batches.size());
  received_.assign(batches.size(), {});
  sent_.assign(batches.size(), {});
  returned_.assign(batches.size(), {});
  double loss = 0.0;
  for (const distributed::PipelineStep& step : distributed::one_forward_one_backward(plan_.graph.stage, stages_, count)) {
    const StageMicroBatch& batch = batches[static_cast<size_t>(step.micro_batch)];
    if (step.kind == distributed::PipelineStep::Kind::Forward) {
      forward(step.micro_batch, batch, world, peer);
    } else {
      loss += backward(step.micro_batch, batch, world, peer);
    }
  }
  world.wait_sends();  // the posted buffers below stay alive until here
  received_.clear();
  sent_.clear();
  returned_.clear();
  return loss;
}

void CpuPipelineStage::forward(int micro_batch, const StageMicroBatch& batch, distributed::Communicator& world,
                               const std::function<int(int)>& peer) {
  const auto m = static_cast<size_t>(micro_batch);
  std::vector<std::vector<float>>& received = received_[m];
  for (size_t k = 0; k < plan_.graph.received.size(); ++k) {
    const distributed::BoundaryTensor& tensor = plan_.graph.received[k];
    received.emplace_back(plan_.training.graph.tensor(received_training_[k]).type.numel());
    world.receive(received.back().data(), received.back().size(), DType::F32, peer(tensor.from),
                  tag(micro_batch, false, tensor.name));
  }
  if (last()) return;
  std::vector<runtime::InputBinding> bindings = batch.forward.bindings();
  for (size_t k = 0; k < received.size(); ++k) {
    bindings.push_back({received_forward_[k], std::as_bytes(std::span<const float>(received[k]))});
  }
  forward_.execute(bindings);
  std::vector<std::vector<float>>& sent = sent_[m];
  for (size_t k = 0; k < plan_.graph.sent.size(); ++k) {
    const distributed::BoundaryTensor& tensor = plan_.graph.sent[k];
    sent.push_back(values_of(forward_, sent_forward_[k]));
    for (int stage : tensor.to) {
      world.send(sent.back().data(), sent.back().size(), DType::F32, peer(stage), tag(micro_batch, false, tensor.name));
    }
  }
}

double CpuPipelineStage::backward(int micro_batch, const StageMicroBatch& batch, distributed::Communicator& world,
                                  const std::function<int(int)>& peer) {
  const auto m = static_cast<size_t>(micro_batch);
  std::vector<runtime::InputBinding> bindings = batch.training.bindings();
  for (size_t k = 0; k < plan_.graph.sent.size(); ++k) {
    // The gradient of a tensor read by several later stages is the sum of theirs, in stage order.
    const distributed::BoundaryTensor& tensor = plan_.graph.sent[k];
    std::vector<float>& gradient = gradients_[k];
    world.receive(gradient.data(), gradient.size(), DType::F32, peer(tensor.to[0]), tag(micro_batch, true, tensor.name));
    for (size_t i = 1; i < tensor.to.size(); ++i) {
      incoming_.resize(gradient.size());
      world.receive(incoming_.data(), incoming_.size(), DType::F32, peer(tensor.to[i]), tag(micro_batch, true, tensor.name));
      std::transform(gradient.begin(), gradient.end(), incoming_.begin(), gradient.begin(), std::plus<>());
    }
    bindings.push_back({sent_gradient_inputs_[k], std::as_bytes(std::span<const float>(gradient))});
  }
  for (size_t k = 0; k < received_training_.size(); ++k) {
    training_.write(received_training_[k], std::as_bytes(std::span<const float>(received_[m][k])));
    std::ranges::fill(training_.view<float>(received_gradients_[k]), 0.0f);
  }
  training_.execute(bindings);
  const double loss = last() ? training_.view<float>(plan_.training.loss)[0] : 0.0;
  std::vector<std::vector<float>>& returned = returned_[m];
  for (size_t k = 0; k < received_gradients_.size(); ++k) {
    const distributed::BoundaryTensor& tensor = plan_.graph.received[k];
    returned.push_back(values_of(training_, received_gradients_[k]));
    world.send(returned.back().data(), returned.back().size(), DType::F32, peer(tensor.from),
               tag(micro_batch, true, tensor.name));
  }
  received_[m].clear();  // the stage keeps a micro-batch's inputs only while it is in flight
  return loss;
}

}  // namespace surogate::train
