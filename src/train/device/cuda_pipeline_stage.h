// One pipeline stage as a GPU rank runs it (train/device/parallel/cuda_rank_host_stages.cpp), the CUDA
// counterpart of cpu_pipeline_stage.h: the stage's training plan in a CudaRankState (bf16 weights,
// fp32 masters, gradient accumulators, the optimizer for the rank's tensors) and, on every stage
// but the last, its forward plan on a second CudaBackend that reads the training backend's
// parameters in place (CudaBackend::share_parameters_with: nothing to refresh after an update).
// run() enqueues one optimizer step's micro-batches in the rounds of distributed/pipeline_rounds.h:
//   forward(m):  m's received boundary tensors copied into the forward plan's inputs, the forward
//                plan run; the tensors it sends are sent from its outputs;
//   backward(m): the gradients of the sent tensors (summed over the stages that read them) copied
//                into the training plan's gradient inputs, m's received tensors into its parameter
//                slots (whose gradients are zeroed), the training plan run (the stage's forward
//                again, then its backward; parameter gradients added into the accumulators); the
//                received tensors' gradients are sent back from the plan's gradient region;
//   each round's transfers: one NCCL group of sends and receives on the training stream; a
//                received tensor waits in a slot of its own (slots reused once its backward ran)
//                until its step reads it.
// Everything runs on the training backend's stream; the forward backend's stream joins it by
// events around each forward, so the two plans run in one order and a send reads a plan's output
// before the next run overwrites it. Nothing waits on the host but CudaBackend's input staging
// (for the previous execute's upload, of an earlier round), and nothing is allocated while
// transfers are in flight: the slots are allocated at start-up (prepare) or before a step's first
// transfer.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/device_buffer.h"
#include "distributed/communicator.h"
#include "distributed/pipeline_rounds.h"
#include "runtime/cuda_backend.h"
#include "train/device/cuda_rank_state.h"
#include "train/device/pipeline_parameters.h"

namespace surogate::train {

class CudaPipelineStage {
public:
  // On the current CUDA device. `setup` is the stage's (its training plan and its parameters'
  // specs, in `layout`'s order); the optimizer steps the trainable tensors [first, end) of `layout`.
  // `stages`: every stage's graph (the transfers' program); `layout` and `plan` must outlive the stage.
  // The training backend binds its kernels from setup.cuda_ops, the forward backend from
  // `forward_ops` (null: the built-in table; with sequence parallelism each has its own group).
  CudaPipelineStage(const TrainingDeviceSetup& setup, const PipelineStagePlan& plan, const CudaTrainableLayout& layout,
                    size_t first, size_t end, std::vector<const distributed::StageGraph*> stages,
                    const runtime::CudaOpTable* forward_ops = nullptr);
  ~CudaPipelineStage();
  CudaPipelineStage(const CudaPipelineStage&) = delete;
  CudaPipelineStage& operator=(const CudaPipelineStage&) = delete;

  CudaRankState& state() { return *state_; }
  // The forward backend's stream (null on the last stage, which has none).
  cudaStream_t forward_stream() const { return forward_ ? forward_->stream() : nullptr; }
  bool last() const { return plan_.graph.sent.empty(); }

  // The program and receive slots of a step of `micro_batches` (run() makes them for a count it has
  // not seen, before its first transfer; the device makes the configured one's at start-up).
  void prepare(int micro_batches) { program(micro_batches); }
  // Enqueues one optimizer step's micro-batches; `peer(stage)` is the world rank of that stage in
  // this rank's replica. The losses (last stage) are read by state().loss_sum() after the stream.
  void run(std::span<const StageMicroBatch> batches, distributed::Communicator& world,
           const std::function<int(int stage)>& peer);

private:
  // Where a received tensor of one micro-batch waits: per (gradient?, tensor, sender) a pool of
  // buffers, and the slot each micro-batch uses, fixed by replaying the program.
  using Channel = std::tuple<bool, std::string, int>;
  struct Program {
    std::vector<distributed::PipelineRound> rounds;
    std::map<std::tuple<bool, std::string, int, int>, size_t> slot;  // (channel, micro-batch) -> slot
    std::map<Channel, size_t> slots;                                  // buffers each channel needs
  };
  const Program& program(int micro_batches);
  void* received(bool gradient, const std::string& tensor, int sender, int micro_batch);
  void forward(int micro_batch, const StageMicroBatch& batch);
  void backward(int micro_batch, const StageMicroBatch& batch);
  void copy(void* destination, const void* source, size_t bytes, cudaStream_t stream) const;

  const PipelineStagePlan& plan_;
  std::vector<const distributed::StageGraph*> stages_;
  std::unique_ptr<CudaRankState> state_;
  std::optional<runtime::CudaBackend> forward_;  // every stage but the last
  std::optional<cuda::Event> training_ready_, forward_done_;
  // Boundary tensors' ids, as in cpu_pipeline_stage.h: received ones in the training plan
  // (parameters), their gradients, and in the forward plan (inputs); sent ones in the forward plan
  // (outputs) and their gradient inputs in the training plan. Indexed by name below.
  std::map<std::string, size_t> received_index_, sent_index_;
  std::vector<graph::TensorId> received_training_, received_gradients_, received_forward_;
  std::vector<graph::TensorId> sent_forward_, sent_gradient_inputs_;
  std::vector<graph::TensorType> received_types_, sent_types_;
  std::map<int, Program> programs_;                           // by micro-batches per step
  std::map<Channel, std::vector<cuda::DeviceBuffer<std::byte>>> buffers_;
  const Program* current_ = nullptr;
};

}  // namespace surogate::train
