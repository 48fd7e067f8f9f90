// A CPU rank's plans, for both strategies of the parallel device (rank_backend.h): the rank's
// training plan on one CpuBackend (a replica's whole model, or a pipeline stage's training plan;
// its parameters are the rank's, its gradients the ones the optimizer reads) and, on every stage
// but the last, the stage's forward plan on a second CpuBackend whose weights are copies
// (refresh_forward_weights after every change). A replica drives it as its ReplicaRunner (one
// micro-batch at a time, its losses, fp8_hybrid's state, kept outputs), a stage as its StageDevice
// (stage_device.h, under pipeline_stage.h: the forward plan reads the received tensors as bound
// inputs, the training plan the sent tensors' gradients). Everything runs at once on the rank's
// thread, so a send's data is copied until the step's sends completed (the next run overwrites the
// plan's outputs).
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "compiler/execution_plan.h"
#include "graph/op_registry.h"
#include "runtime/cpu_backend.h"
#include "train/device/parallel/rank_backend.h"
#include "train/device/parallel/stage_device.h"
#include "train/fp8_weight_copies.h"

namespace surogate::train {

class CpuRankPlans final : public ReplicaRunner, public StageDevice {
public:
  // A replica's: the whole model's plan, which the host loads into training() (the trainer's plan
  // or ZeRO-3's copy with the weights in gather buffers). `plan`: the trainer's (its loss); the FP8
  // copies: the trained weights' (full fine-tuning). Both must outlive the plans.
  CpuRankPlans(const compiler::ExecutionPlan& plan, std::optional<graph::TensorId> router_aux_loss,
               const std::vector<Fp8WeightCopy>& fp8_copies);
  // A pipeline stage's (`plan` must outlive the plans; `boundary`: stage_boundary(plan)).
  CpuRankPlans(const PipelineStagePlan& plan, const graph::OpRegistry& registry, StageBoundary boundary);

  runtime::CpuBackend& training() { return training_; }
  // A stage's forward plan's weights ← the training plan's: every fp32 weight (after loading or a
  // resume), or only the trained ones (after an update).
  void refresh_forward_weights(bool trained_only);
  // Writes a weight a stage's plans hold (both backends; nothing when they hold none).
  void write_weight(const std::string& name, std::span<const std::byte> bytes);

  // A replica's (ReplicaRunner).
  void set_step_observer(runtime::StepObserverList* observers) override { training_.set_step_observer(observers); }
  void run(const MicroBatch& batch, bool last) override;
  RankMeasure losses() override { return std::exchange(losses_, {}); }
  bool has_router_aux_loss() const override { return router_aux_loss_.has_value(); }
  void refresh_fp8_weight_copies() override { train::refresh_fp8_weight_copies(training_, *fp8_copies_); }
  float* fp8_state(const Fp8State& fp8) override { return training_.view<float>(fp8.tensor).data(); }
  void roll_fp8_history(const Fp8State& fp8, int64_t step, float headroom = 1.0f) override;
  void drop_fp8_amaxes(const Fp8State& fp8) override;
  void keep_outputs(std::span<const graph::TensorId> tensors) override { kept_ids_.assign(tensors.begin(), tensors.end()); }
  std::vector<KeptOutputs> take_outputs() override { return std::exchange(kept_, {}); }

  // A stage's (StageDevice).
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
  double loss() override { return std::exchange(losses_, {}).loss; }
  void refresh_weights() override { refresh_forward_weights(true); }

private:
  // The training plan on `bindings`: its losses summed (where it has them), keep_outputs()'s kept.
  void run_training_plan(std::span<const runtime::InputBinding> bindings);

  const compiler::ExecutionPlan& plan_;  // the training plan the losses are read by
  const PipelineStagePlan* stage_ = nullptr;
  bool has_loss_ = true;  // a replica, or the last stage
  std::optional<graph::TensorId> router_aux_loss_;  // MoE plans with the router loss
  const std::vector<Fp8WeightCopy>* fp8_copies_ = nullptr;
  runtime::CpuBackend training_;
  runtime::CpuBackend forward_;  // every stage but the last
  RankMeasure losses_;                     // the step's, so far
  std::vector<graph::TensorId> kept_ids_;  // keep_outputs()'s, in the rank's plan
  std::vector<KeptOutputs> kept_;          // since take_outputs()
  StageBoundary boundary_;
  // A stage's weights both plans hold, (training id, forward id): trained, and frozen fp32 ones.
  std::vector<std::pair<graph::TensorId, graph::TensorId>> trained_weights_, frozen_weights_;
  std::vector<std::vector<float>> gradients_;  // the summed gradients of the sent tensors (one micro-batch)
  std::vector<std::unique_ptr<std::byte[]>> buffers_;  // allocate()'s
  std::deque<std::vector<std::byte>> outgoing_;       // the step's sends' data
};

}  // namespace surogate::train
