// The optimizer of a rank whose masters and/or optimizer state live in pinned host memory and are
// staged (offload_master / offload_optimizer without use_zero_copy; host_offload_plan.h).
//
// The trainable tensors are cut into chunks of consecutive whole tensors (the plan's chunks).
// Each chunk has its own optimizer (device_adamw / device_adamw_8bit) whose masters and state
// pointers address one of two GPU slots, chunk k using slot k mod 2. One step, on three streams:
//   copy-in   (H2D): chunk k's masters and state → its slot, once chunk k-2's copy-out is done
//   step      (the rank's stream): chunk k's optimizer on the slot, once its copy-in is done
//   copy-out  (D2H): the slot → host, once chunk k's kernels are done
// so chunk k+1's copy-in and chunk k-1's copy-out overlap chunk k's kernels (PCIe is full duplex).
// The rank's stream waits for the last copy-outs before anything after the step runs on it, and
// the first copy-ins wait for everything the rank's stream held before the step (the gradients,
// the clip factor). Each element's arithmetic is the unsplit optimizer's, so a staged run is
// bit-identical to one without offloading (tests/train_cuda/test_host_offload.cpp).
// The optimizer state's host arrays are the state (checkpoints read and restore them in place);
// state_tensors() lists the chunks' in order, which is the unsplit optimizer's list.
#pragma once

#include <memory>
#include <vector>

#include "config/sections/optimizer.h"
#include "train/device/device_optimizer.h"
#include "train/device/host_offload_plan.h"

namespace surogate::train {

// `parameters`: the optimizer's tensors in the plan's order, with `master` the host address of
// each one's fp32 master when the plan offloads masters (in the pinned flat buffer whose element
// 0 is `host_masters`, at the plan's offsets), else its GPU master (or null with bf16 masters).
// `optimizer` and `rounding_seed` as make_device_optimizer takes them.
std::unique_ptr<DeviceOptimizer> make_staged_optimizer(const config::Optimizer& optimizer, uint64_t rounding_seed,
                                                       std::vector<DeviceParameter> parameters,
                                                       const HostOffloadPlan& plan, float* host_masters);

}  // namespace surogate::train
