// Where a CUDA rank's trainable tensors live, from the plan alone (no device needed): the flat
// layout every rank piece addresses (masters.h, gradient_accumulators.h, the optimizer's
// parameters, ZeRO's shards), and the host fp32 copies a CUDA device shows the trainer.
// Flat layout: the trainable tensors in spec order, each one's start rounded up to 4 elements, so
// every tensor starts 16-byte (fp32) or 8-byte (bf16) aligned (the grad-norm and optimizer kernels
// load 4-element vectors).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "cuda/host_registration.h"
#include "models/model_spec.h"
#include "train/device/host_offload_plan.h"
#include "train/device/training_device.h"

namespace surogate::train {

struct CudaTrainable {
  size_t weight;               // index into the specs (and the device's host weights)
  graph::TensorId parameter;   // the bf16 (fp16) weight in the plan
  graph::TensorId gradient;    // its bf16 (fp16) gradient
  int64_t offset;              // into the flat master and accumulator buffers
  int64_t count;
};

// A contiguous run of the flat layout: the elements of trainable tensors [first, end).
struct FlatRun {
  size_t first = 0, end = 0;
  int64_t base = 0;   // the first tensor's offset (the layout's total when the run is empty at the end)
  int64_t count = 0;  // elements up to the next tensor's offset (padding included)
  bool contains(size_t index) const { return index >= first && index < end; }
};

// Where every parameter lives: UserError if a parameter is not bf16 or fp16, or the parameters'
// dtypes differ.
struct CudaTrainableLayout {
  std::vector<graph::TensorId> ids;     // every spec's tensor in the plan, in spec order
  std::vector<CudaTrainable> entries;   // the trainable ones, in spec order
  int64_t total = 0;                    // elements of the flat buffers
  DType dtype = DType::BF16;            // the parameters' dtype: BF16, or F16 (fp16 training)
  // Each trainable tensor's elements in the flat buffers, padding included (what shards split).
  std::vector<size_t> unit_sizes() const;
  // The trainable tensors [first, end) as the host-offload plan sees them.
  std::vector<TrainableExtent> extents(size_t first, size_t end) const;
  // The run of trainable tensors [first, end); every tensor's (the whole layout) when `whole`.
  FlatRun run(size_t first, size_t end, bool whole = false) const;
};
CudaTrainableLayout cuda_trainable_layout(const compiler::ExecutionPlan& plan,
                                          std::span<const models::ParameterSpec> specs);

// The host fp32 copies a CUDA training device shows the trainer (weights(), trainable()), one per
// spec. Uninitialised: every value is written (loaded, initialised or restored) before upload(),
// and zeroing 32 GB of an 8B model's host copies took ~15 s of start-up.
// The trainable ones are page-locked (cuda/host_registration.h): checkpoints download into them.
struct CudaHostWeights {
  std::vector<std::unique_ptr<float[]>> values;
  std::vector<WeightView> weights, trainable;
  std::vector<cuda::HostRegistration> pinned;
};
CudaHostWeights cuda_host_weights(std::span<const models::ParameterSpec> specs, const CudaTrainableLayout& layout);

}  // namespace surogate::train
