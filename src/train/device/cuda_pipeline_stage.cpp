// One pipeline stage on a GPU rank; see cuda_pipeline_stage.h.
#include "train/device/cuda_pipeline_stage.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels/core_ops.h"
#include "cuda/kernels/elementwise_16bit.h"
#include "distributed/nccl_group.h"

namespace surogate::train {
namespace {

void check_transfer_dtype(const graph::TensorInfo& info) {
  SUROGATE_CHECK(info.type.dtype == DType::BF16 || info.type.dtype == DType::F32,
                 "boundary tensor '{}' is bf16 or fp32 (NCCL's transfers)", info.name);
}

// destination += source, in their dtype (bf16: an fp32 sum rounded once).
void accumulate(void* destination, const void* source, const graph::TensorType& type, cudaStream_t stream) {
  if (type.dtype == DType::BF16) {
    cuda::accumulate_16bit(static_cast<const __nv_bfloat16*>(source),
                                           static_cast<__nv_bfloat16*>(destination), type.numel(), stream);
  } else {
    cuda::accumulate_f32(static_cast<const float*>(source), static_cast<float*>(destination),
                                          type.numel(), stream);
  }
}

}  // namespace

CudaPipelineStage::CudaPipelineStage(const TrainingDeviceSetup& setup, const PipelineStagePlan& plan,
                                     const CudaTrainableLayout& layout, size_t first, size_t end,
                                     std::vector<const distributed::StageGraph*> stages,
                                     const runtime::CudaOpTable* forward_ops)
    : plan_(plan), stages_(std::move(stages)) {
  state_ = std::make_unique<CudaRankState>(setup, layout, first, end);
  const compiler::ExecutionPlan& training = plan_.training;
  for (const distributed::BoundaryTensor& tensor : plan_.graph.received) {
    const graph::TensorId id = training.tensor(tensor.name);
    check_transfer_dtype(training.graph.tensor(id));
    received_index_[tensor.name] = received_training_.size();
    received_training_.push_back(id);
    received_gradients_.push_back(training.parameter_gradients.at(id));
    received_types_.push_back(training.graph.tensor(id).type);
  }
  if (last()) return;
  const compiler::ExecutionPlan& forward = plan_.forward;
  forward_.emplace(forward_ops != nullptr ? *forward_ops : runtime::builtin_cuda_ops());
  forward_->share_parameters_with(state_->backend());  // the weights, read in place
  forward_->load(forward, *setup.registry);
  training_ready_.emplace();
  forward_done_.emplace();
  for (const distributed::BoundaryTensor& tensor : plan_.graph.received) received_forward_.push_back(forward.tensor(tensor.name));
  for (const distributed::BoundaryTensor& tensor : plan_.graph.sent) {
    const graph::TensorId id = forward.tensor(tensor.name);
    check_transfer_dtype(forward.graph.tensor(id));
    sent_index_[tensor.name] = sent_forward_.size();
    sent_forward_.push_back(id);
    sent_gradient_inputs_.push_back(training.tensor(tensor.name + distributed::kPipelineGradSuffix));
    sent_types_.push_back(forward.graph.tensor(id).type);
  }
}

CudaPipelineStage::~CudaPipelineStage() {
  // The slots and the forward plan's memory may still be read by transfers in flight.
  if (state_) cudaStreamSynchronize(state_->stream());
  if (forward_) cudaStreamSynchronize(forward_->stream());
}

const CudaPipelineStage::Program& CudaPipelineStage::program(int micro_batches) {
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
  // The slots this program needs beyond those allocated for earlier ones (run() calls this before
  // its first transfer).
  for (const auto& [channel, count] : program.slots) {
    const auto& [gradient, tensor, sender] = channel;
    const graph::TensorType& type =
        gradient ? sent_types_[sent_index_.at(tensor)] : received_types_[received_index_.at(tensor)];
    std::vector<cuda::DeviceBuffer<std::byte>>& pool = buffers_[channel];
    while (pool.size() < count) pool.emplace_back(type.size_bytes());
  }
  return programs_.emplace(micro_batches, std::move(program)).first->second;
}

void* CudaPipelineStage::received(bool gradient, const std::string& tensor, int sender, int micro_batch) {
  const size_t slot = current_->slot.at({gradient, tensor, sender, micro_batch});
  return buffers_.at({gradient, tensor, sender})[slot].data();
}

void CudaPipelineStage::copy(void* destination, const void* source, size_t bytes, cudaStream_t stream) const {
  CUDA_CHECK(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice, stream));
}

void CudaPipelineStage::run(std::span<const StageMicroBatch> batches, distributed::Communicator& world,
                            const std::function<int(int)>& peer) {
  current_ = &program(static_cast<int>(batches.size()));
  const int stage = plan_.graph.stage;
  runtime::CudaBackend& training = state_->backend();
  for (const distributed::PipelineRound& round : current_->rounds) {
    if (round.step) {
      const StageMicroBatch& batch = batches[static_cast<size_t>(round.step->micro_batch)];
      if (round.step->kind == distributed::PipelineStep::Kind::Forward) forward(round.step->micro_batch, batch);
      else backward(round.step->micro_batch, batch);
    }
    if (round.transfers.empty()) continue;
    // One group: the round's sends and receives progress independently (pipeline_rounds.h).
    distributed::NcclGroup group;
    for (const distributed::PipelineTransfer& transfer : round.transfers) {
      if (transfer.sender == stage) {
        // From the plan that computed it, before that plan runs again (stream order).
        const bool gradient = transfer.gradient;
        const size_t k = gradient ? received_index_.at(transfer.tensor) : sent_index_.at(transfer.tensor);
        const graph::TensorType& type = gradient ? received_types_[k] : sent_types_[k];
        const void* data = gradient ? training.device_address(received_gradients_[k])
                                    : forward_->device_address(sent_forward_[k]);
        world.send(data, static_cast<size_t>(type.numel()), type.dtype, peer(transfer.receiver), 0);
      } else {
        const graph::TensorType& type = transfer.gradient ? sent_types_[sent_index_.at(transfer.tensor)]
                                                          : received_types_[received_index_.at(transfer.tensor)];
        world.receive(received(transfer.gradient, transfer.tensor, transfer.sender, transfer.micro_batch),
                      static_cast<size_t>(type.numel()), type.dtype, peer(transfer.sender), 0);
      }
    }
    group.close();
  }
  current_ = nullptr;
}

void CudaPipelineStage::forward(int micro_batch, const StageMicroBatch& batch) {
  if (last()) return;  // the last stage runs its training plan at once, in backward()
  cudaStream_t stream = forward_->stream();
  training_ready_->record(state_->stream());
  CUDA_CHECK(cudaStreamWaitEvent(stream, training_ready_->get(), 0));
  for (size_t k = 0; k < received_forward_.size(); ++k) {
    const distributed::BoundaryTensor& tensor = plan_.graph.received[k];
    copy(forward_->device_address(received_forward_[k]), received(false, tensor.name, tensor.from, micro_batch),
         received_types_[k].size_bytes(), stream);
  }
  forward_->execute(batch.forward.bindings());
  forward_done_->record(stream);
  CUDA_CHECK(cudaStreamWaitEvent(state_->stream(), forward_done_->get(), 0));
}

void CudaPipelineStage::backward(int micro_batch, const StageMicroBatch& batch) {
  runtime::CudaBackend& training = state_->backend();
  cudaStream_t stream = state_->stream();
  for (size_t k = 0; k < sent_gradient_inputs_.size(); ++k) {
    // The gradient of a tensor read by several later stages is the sum of theirs, in stage order.
    const distributed::BoundaryTensor& tensor = plan_.graph.sent[k];
    void* gradient = training.device_address(sent_gradient_inputs_[k]);
    copy(gradient, received(true, tensor.name, tensor.to[0], micro_batch), sent_types_[k].size_bytes(), stream);
    for (size_t i = 1; i < tensor.to.size(); ++i) {
      accumulate(gradient, received(true, tensor.name, tensor.to[i], micro_batch), sent_types_[k], stream);
    }
  }
  for (size_t k = 0; k < received_training_.size(); ++k) {
    const distributed::BoundaryTensor& tensor = plan_.graph.received[k];
    copy(training.device_address(received_training_[k]), received(false, tensor.name, tensor.from, micro_batch),
         received_types_[k].size_bytes(), stream);
    CUDA_CHECK(cudaMemsetAsync(training.device_address(received_gradients_[k]), 0, received_types_[k].size_bytes(), stream));
  }
  state_->accumulate(batch.training.bindings());
}

}  // namespace surogate::train
