// A CPU rank's plans; see cpu_rank_plans.h.
#include "train/device/parallel/cpu_rank_plans.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "quant/fp8_scaling.h"

namespace surogate::train {

CpuRankPlans::CpuRankPlans(const compiler::ExecutionPlan& plan, std::optional<graph::TensorId> router_aux_loss,
                           const std::vector<Fp8WeightCopy>& fp8_copies)
    : plan_(plan), router_aux_loss_(router_aux_loss), fp8_copies_(&fp8_copies) {}

CpuRankPlans::CpuRankPlans(const PipelineStagePlan& plan, const graph::OpRegistry& registry, StageBoundary boundary)
    : plan_(plan.training), stage_(&plan), has_loss_(plan.graph.sent.empty()), boundary_(std::move(boundary)) {
  const compiler::ExecutionPlan& training = plan.training;
  training_.load(training, registry);
  if (has_loss_) return;  // the last stage has no forward plan
  const compiler::ExecutionPlan& forward = plan.forward;
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

void CpuRankPlans::run_training_plan(std::span<const runtime::InputBinding> bindings) {
  training_.execute(bindings);
  if (has_loss_) losses_.loss += training_.view<float>(plan_.loss)[0];
  if (router_aux_loss_) losses_.router_aux_loss += training_.view<float>(*router_aux_loss_)[0];
  if (kept_ids_.empty()) return;
  KeptOutputs& outputs = kept_.emplace_back();
  for (graph::TensorId id : kept_ids_) outputs.emplace_back(training_.view<float>(id).begin(), training_.view<float>(id).end());
}

void CpuRankPlans::run(const MicroBatch& batch, bool) { run_training_plan(batch.bindings()); }

void CpuRankPlans::roll_fp8_history(const Fp8State& fp8, int64_t step, float headroom) {
  quant::roll_fp8_history(fp8_state(fp8), fp8.shape.sites, fp8.shape.history, step, headroom);
}

void CpuRankPlans::drop_fp8_amaxes(const Fp8State& fp8) {
  quant::drop_current_amaxes(fp8_state(fp8), fp8.shape.sites, fp8.shape.history);
}

void CpuRankPlans::refresh_forward_weights(bool trained_only) {
  for (const auto* weights : {&trained_weights_, &frozen_weights_}) {
    if (trained_only && weights == &frozen_weights_) continue;
    for (const auto& [training, forward] : *weights) {
      const std::span<float> from = training_.view<float>(training);
      std::ranges::copy(from, forward_.view<float>(forward).begin());
    }
  }
}

void CpuRankPlans::write_weight(const std::string& name, std::span<const std::byte> bytes) {
  if (auto id = stage_->training.graph.find_tensor(name)) training_.write(*id, bytes);
  if (has_loss_) return;  // the last stage has no forward plan
  if (auto id = stage_->forward.graph.find_tensor(name)) forward_.write(*id, bytes);
}

void* CpuRankPlans::allocate(size_t bytes) { return buffers_.emplace_back(std::make_unique<std::byte[]>(bytes)).get(); }

void CpuRankPlans::run_forward(const StageMicroBatch& batch, std::span<void* const> received) {
  std::vector<runtime::InputBinding> bindings = batch.forward.bindings();
  for (size_t k = 0; k < received.size(); ++k) {
    const std::byte* data = static_cast<const std::byte*>(received[k]);
    bindings.push_back({boundary_.received_forward[k], {data, boundary_.received_types[k].size_bytes()}});
  }
  forward_.execute(bindings);
}

void CpuRankPlans::run_training(const StageMicroBatch& batch) {
  std::vector<runtime::InputBinding> bindings = batch.training.bindings();
  for (size_t k = 0; k < gradients_.size(); ++k) {
    bindings.push_back({boundary_.sent_gradient_inputs[k], std::as_bytes(std::span<const float>(gradients_[k]))});
  }
  run_training_plan(bindings);
}

void CpuRankPlans::copy(void* destination, const void* source, size_t bytes) {
  std::memcpy(destination, source, bytes);
}

// The CPU's plans are fp32.
void CpuRankPlans::add(void* destination, const void* source, const graph::TensorType& type) {
  SUROGATE_CHECK(type.dtype == DType::F32, "a CPU stage's boundary tensors are fp32");
  float* sum = static_cast<float*>(destination);
  const float* more = static_cast<const float*>(source);
  std::transform(sum, sum + type.numel(), more, sum, std::plus<>());
}

void CpuRankPlans::zero(void* destination, size_t bytes) { std::memset(destination, 0, bytes); }

const void* CpuRankPlans::outgoing(const void* data, size_t bytes) {
  const std::byte* from = static_cast<const std::byte*>(data);
  return outgoing_.emplace_back(from, from + bytes).data();
}

}  // namespace surogate::train
