// The CUDA backend's asynchronous host copies; see cuda_host_copies.h.
#include "runtime/cuda_host_copies.h"

#include "core/error.h"
#include "cuda/cuda_check.h"

namespace surogate::runtime {

void CudaHostCopies::prepare(const compiler::ExecutionPlan& plan,
                             const std::function<std::byte*(graph::TensorId)>& address) {
  copies_.clear();
  copy_of_step_.assign(plan.steps.size(), -1);
  joins_.assign(plan.steps.size(), {});
  for (size_t index = 0; index < plan.steps.size(); ++index) {
    const compiler::PlanStep& step = plan.steps[index];
    if (!step.asynchronous) continue;
    const graph::Node& node = plan.graph.node(step.node);
    const graph::TensorId source = node.inputs[0], destination = node.outputs[0];
    const bool to_host = step.outputs[0].storage == compiler::Storage::Host;
    SUROGATE_CHECK(to_host != (step.inputs[0].storage == compiler::Storage::Host),
                   "asynchronous step '{}' copies between host and device memory", node.name);
    copy_of_step_[index] = static_cast<int>(copies_.size());
    Copy& copy = copies_.emplace_back();
    copy.destination = address(destination);
    copy.source = address(source);
    copy.bytes = step.outputs[0].size_bytes;
    copy.to_host = to_host;
  }
  for (size_t index = 0; index < plan.steps.size(); ++index) {
    for (size_t joined : plan.steps[index].joins) {
      SUROGATE_CHECK(copy_of_step_[joined] >= 0, "step {} joins step {}, which is not asynchronous", index, joined);
      joins_[index].push_back(static_cast<size_t>(copy_of_step_[joined]));
    }
  }
  if (copies_.empty()) return;
  if (!to_host_) to_host_.emplace();
  if (!to_device_) to_device_.emplace();
}

bool CudaHostCopies::launch(size_t index, cudaStream_t stream) const {
  if (copies_.empty()) return false;
  for (size_t joined : joins_[index]) CUDA_CHECK(cudaStreamWaitEvent(stream, copies_[joined].done, 0));
  if (copy_of_step_[index] < 0) return false;
  const Copy& copy = copies_[static_cast<size_t>(copy_of_step_[index])];
  const cuda::Stream& side = copy.to_host ? *to_host_ : *to_device_;
  copy.ready.record(stream);
  side.wait(copy.ready);
  CUDA_CHECK(cudaMemcpyAsync(copy.destination, copy.source, copy.bytes,
                             copy.to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, side));
  copy.done.record(side);
  return true;
}

}  // namespace surogate::runtime
