// The asynchronous steps of a plan on the CUDA backend: offload_residual's host copies
// (offload_to_host, fetch_from_host; compiler/residual_offload.h). Each copy runs on a side
// stream — device-to-host copies on one, host-to-device copies on another, so the two directions
// of the link can overlap — forked from the backend's stream where its step stands (a `ready`
// event recorded there, waited for by the side stream) and joined back just before the step the
// plan says it completes by (its `done` event, waited for by the backend's stream). In between,
// the backend's stream runs the following steps' kernels: the copy overlaps compute, and the plan
// keeps the memory it reads or writes out of those steps' way (compiler/memory_plan.h).
// Streams and events are made once, in prepare(); a launch only records, waits and copies, so it
// is captured into the backend's CUDA graph like the kernels (stream capture turns the fork and
// the join into graph edges, and every fork is joined before the graph ends).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include "compiler/execution_plan.h"
#include "cuda/device_buffer.h"

namespace surogate::runtime {

class CudaHostCopies {
public:
  // For `plan`'s asynchronous steps; `address` gives a tensor's memory (pinned host region or
  // device arena). Replaces what an earlier plan prepared.
  void prepare(const compiler::ExecutionPlan& plan, const std::function<std::byte*(graph::TensorId)>& address);
  // Enqueues on `stream` the joins step `index` waits for and, when the step is a copy, forks it.
  // True when the step was a copy: the backend launches no kernel for it.
  bool launch(size_t index, cudaStream_t stream) const;
  size_t copies() const { return copies_.size(); }

private:
  struct Copy {
    std::byte* destination = nullptr;
    const std::byte* source = nullptr;
    size_t bytes = 0;
    bool to_host = false;
    cuda::Event ready{false};  // recorded on the backend's stream: what came before the copy is done
    cuda::Event done{false};   // recorded on the side stream after the copy
  };

  std::vector<int> copy_of_step_;           // per step: index into copies_, or -1
  std::vector<std::vector<size_t>> joins_;  // per step: the copies that must be done before it
  std::vector<Copy> copies_;
  std::optional<cuda::Stream> to_host_, to_device_;
};

}  // namespace surogate::runtime
