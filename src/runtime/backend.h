// The Backend interface: what the trainer sees of a device. A backend loads an ExecutionPlan
// once (allocates its four regions, binds one kernel per step), then runs it any number of
// times. Tensors are addressed by TensorId or by name and copied in and out as raw bytes in the
// plan's dtypes; nothing is allocated between load() and the end of training.
// Implementations: CpuBackend (runtime/cpu_backend.h); the CUDA backend implements the same
// interface with its own kernel table keyed by op name.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "compiler/execution_plan.h"
#include "graph/op_registry.h"

namespace surogate::runtime {

// One caller-provided input for execute(): the bytes of a graph input, in its dtype.
struct InputBinding {
  graph::TensorId tensor = graph::kNoTensor;
  std::span<const std::byte> data;
};

// One copy inside a tensor for copy_within(): `bytes` bytes from byte offset `from` to byte
// offset `to` of the same tensor.
struct ByteMove {
  graph::TensorId tensor = graph::kNoTensor;
  size_t from = 0, to = 0, bytes = 0;
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // Allocates memory for `plan` and binds kernels. The plan must outlive the backend.
  virtual void load(const compiler::ExecutionPlan& plan, const graph::OpRegistry& registry) = 0;

  // Copies bytes into / out of a tensor (inputs, parameters, constants, any live arena tensor).
  // The byte count must equal the tensor's size (UserError otherwise).
  virtual void write(graph::TensorId tensor, std::span<const std::byte> data) = 0;
  virtual void read(graph::TensorId tensor, std::span<std::byte> data) const = 0;
  // Copies ranges inside tensors on the device (generation's KV caches: a prompt's keys and values
  // handed from one slot to another), all done when it returns. No move's destination may overlap
  // another move's source or destination; a range outside its tensor is an InternalError.
  virtual void copy_within(std::span<const ByteMove> moves) = 0;

  // Writes the given inputs (inputs not given keep their last values), then runs every step of
  // the plan in order.
  virtual void execute(std::span<const InputBinding> inputs) = 0;

  // Sets every parameter gradient to zero (the optimizer calls this after its step).
  virtual void zero_gradients() = 0;
};

}  // namespace surogate::runtime
