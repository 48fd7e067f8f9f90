// One pipeline stage on a rank, written once for every backend; see pipeline_stage.h.
#include "train/device/parallel/pipeline_stage.h"

#include <algorithm>
#include <set>
#include <utility>

#include "core/error.h"

namespace surogate::train {
namespace {

void check_transfer_dtype(const graph::TensorInfo& info) {
  SUROGATE_CHECK(info.type.dtype == DType::BF16 || info.type.dtype == DType::F32,
                 "boundary tensor '{}' is bf16 or fp32 (the collectives' transfers)", info.name);
}

}  // namespace

StageBoundary stage_boundary(const PipelineStagePlan& plan) {
  StageBoundary boundary;
  const compiler::ExecutionPlan& training = plan.training;
  for (const distributed::BoundaryTensor& tensor : plan.graph.received) {
    const graph::TensorId id = training.tensor(tensor.name);
    check_transfer_dtype(training.graph.tensor(id));
    boundary.received_training.push_back(id);
    boundary.received_gradients.push_back(training.parameter_gradients.at(id));
    boundary.received_types.push_back(training.graph.tensor(id).type);
  }
  if (plan.graph.sent.empty()) return boundary;  // the last stage has no forward plan
  const compiler::ExecutionPlan& forward = plan.forward;
  for (const distributed::BoundaryTensor& tensor : plan.graph.received) {
    boundary.received_forward.push_back(forward.tensor(tensor.name));
  }
  for (const distributed::BoundaryTensor& tensor : plan.graph.sent) {
    const graph::TensorId id = forward.tensor(tensor.name);
    check_transfer_dtype(forward.graph.tensor(id));
    boundary.sent_forward.push_back(id);
    boundary.sent_gradient_inputs.push_back(training.tensor(tensor.name + distributed::kPipelineGradSuffix));
    boundary.sent_types.push_back(forward.graph.tensor(id).type);
  }
  return boundary;
}

PipelineStage::PipelineStage(const compiler::ExecutionPlan& source, const PipelineStagePlan& plan,
                             std::vector<const distributed::StageGraph*> stages, StageBoundary boundary,
                             std::unique_ptr<StageDevice> device)
    : source_(source), plan_(plan), stages_(std::move(stages)), boundary_(std::move(boundary)),
      device_(std::move(device)) {
  for (size_t k = 0; k < plan_.graph.received.size(); ++k) received_index_[plan_.graph.received[k].name] = k;
  for (size_t k = 0; k < plan_.graph.sent.size(); ++k) sent_index_[plan_.graph.sent[k].name] = k;
  for (const distributed::StageGraph* stage : stages_) {
    for (const distributed::BoundaryTensor& tensor : stage->sent) {
      tags_.try_emplace(tensor.name, static_cast<uint32_t>(tags_.size()));
    }
  }
}

StageMicroBatch PipelineStage::take(std::span<const runtime::InputBinding> inputs, int sequence, int sequence_ranks) {
  return take_stage_micro_batch(plan_, source_, inputs, sequence, sequence_ranks);
}

double PipelineStage::loss() {
  const double loss = device_->loss();
  return last() ? loss : 0.0;
}

uint32_t PipelineStage::tag(int micro_batch, bool gradient, const std::string& tensor) const {
  const auto tensors = static_cast<uint32_t>(tags_.size());
  return (static_cast<uint32_t>(micro_batch) * 2 + (gradient ? 1 : 0)) * tensors + tags_.at(tensor);
}

// A gradient has its tensor's type: the stage sends its sent tensors and its received ones' gradients.
const graph::TensorType& PipelineStage::type(bool sent_tensor, const std::string& tensor) const {
  return sent_tensor ? boundary_.sent_types[sent_index_.at(tensor)]
                     : boundary_.received_types[received_index_.at(tensor)];
}

const PipelineStage::Program& PipelineStage::program(int micro_batches) {
  auto found = programs_.find(micro_batches);
  if (found != programs_.end()) return found->second;
  Program program;
  program.rounds = distributed::pipeline_rounds(stages_, micro_batches)[static_cast<size_t>(plan_.graph.stage)];
  // Replays the program: a received tensor takes the lowest free slot of its channel and keeps it
  // until the backward of its micro-batch has read it.
  std::map<Channel, std::set<size_t>> busy;
  std::map<int, std::vector<std::pair<Channel, size_t>>> held;  // by micro-batch
  const int stage = plan_.graph.stage;
  for (const distributed::PipelineRound& round : program.rounds) {
    if (round.step && round.step->kind == distributed::PipelineStep::Kind::Backward) {
      for (const auto& [channel, slot] : held[round.step->micro_batch]) busy[channel].erase(slot);
      held.erase(round.step->micro_batch);
    }
    for (const distributed::PipelineTransfer& transfer : round.transfers) {
      if (transfer.receiver != stage) continue;
      const Channel channel{transfer.gradient, transfer.tensor, transfer.sender};
      std::set<size_t>& taken = busy[channel];
      size_t slot = 0;
      while (taken.contains(slot)) ++slot;
      taken.insert(slot);
      held[transfer.micro_batch].emplace_back(channel, slot);
      program.slot[{transfer.gradient, transfer.tensor, transfer.sender, transfer.micro_batch}] = slot;
      program.slots[channel] = std::max(program.slots[channel], slot + 1);
    }
  }
  // The slots this program needs beyond those allocated for earlier ones (a received gradient is
  // of one of the stage's sent tensors).
  for (const auto& [channel, count] : program.slots) {
    const auto& [gradient, tensor, sender] = channel;
    std::vector<void*>& pool = slots_[channel];
    while (pool.size() < count) pool.push_back(device_->allocate(type(gradient, tensor).size_bytes()));
  }
  return programs_.emplace(micro_batches, std::move(program)).first->second;
}

void* PipelineStage::received(bool gradient, const std::string& tensor, int sender, int micro_batch) const {
  const size_t slot = current_->slot.at({gradient, tensor, sender, micro_batch});
  return slots_.at({gradient, tensor, sender})[slot];
}

void PipelineStage::run(std::span<const StageMicroBatch> batches, distributed::Communicator& world,
                        const std::function<int(int)>& peer) {
  current_ = &program(static_cast<int>(batches.size()));
  for (const distributed::PipelineRound& round : current_->rounds) {
    if (round.step) {
      const StageMicroBatch& batch = batches[static_cast<size_t>(round.step->micro_batch)];
      if (round.step->kind == distributed::PipelineStep::Kind::Forward) forward(round.step->micro_batch, batch);
      else backward(round.step->micro_batch, batch);
    }
    if (round.transfers.empty()) continue;
    device_->exchange([&] {
      for (const distributed::PipelineTransfer& each : round.transfers) transfer(each, world, peer);
    });
  }
  world.wait_sends();  // outgoing()'s buffers stay as they are until here
  device_->sends_done();
  current_ = nullptr;
}

// A send reads the plan that computed the tensor, after the round's step (before that plan runs again).
void PipelineStage::transfer(const distributed::PipelineTransfer& transfer, distributed::Communicator& world,
                             const std::function<int(int)>& peer) {
  const bool sends = transfer.sender == plan_.graph.stage;
  const graph::TensorType& tensor = type(sends != transfer.gradient, transfer.tensor);
  const auto count = static_cast<size_t>(tensor.numel());
  const uint32_t label = tag(transfer.micro_batch, transfer.gradient, transfer.tensor);
  if (sends) {
    const void* data = transfer.gradient ? device_->received_gradient(received_index_.at(transfer.tensor))
                                         : device_->sent(sent_index_.at(transfer.tensor));
    world.send(device_->outgoing(data, tensor.size_bytes()), count, tensor.dtype, peer(transfer.receiver), label);
  } else {
    world.receive(received(transfer.gradient, transfer.tensor, transfer.sender, transfer.micro_batch), count,
                  tensor.dtype, peer(transfer.sender), label);
  }
}

void PipelineStage::forward(int micro_batch, const StageMicroBatch& batch) {
  if (last()) return;  // the last stage runs its training plan at once, in backward()
  std::vector<void*> received_tensors;
  for (const distributed::BoundaryTensor& tensor : plan_.graph.received) {
    received_tensors.push_back(received(false, tensor.name, tensor.from, micro_batch));
  }
  device_->run_forward(batch, received_tensors);
}

void PipelineStage::backward(int micro_batch, const StageMicroBatch& batch) {
  for (size_t k = 0; k < plan_.graph.sent.size(); ++k) {
    // The gradient of a tensor read by several later stages is the sum of theirs, in stage order.
    const distributed::BoundaryTensor& tensor = plan_.graph.sent[k];
    void* gradient = device_->sent_gradient(k);
    const size_t bytes = boundary_.sent_types[k].size_bytes();
    device_->copy(gradient, received(true, tensor.name, tensor.to[0], micro_batch), bytes);
    for (size_t i = 1; i < tensor.to.size(); ++i) {
      device_->add(gradient, received(true, tensor.name, tensor.to[i], micro_batch), boundary_.sent_types[k]);
    }
  }
  for (size_t k = 0; k < plan_.graph.received.size(); ++k) {
    const distributed::BoundaryTensor& tensor = plan_.graph.received[k];
    const size_t bytes = boundary_.received_types[k].size_bytes();
    device_->copy(device_->received_parameter(k), received(false, tensor.name, tensor.from, micro_batch), bytes);
    device_->zero(device_->received_gradient(k), bytes);
  }
  device_->run_training(batch);
}

}  // namespace surogate::train
