// CpuBackend: the reference backend. It owns five 256-byte-aligned host buffers (activation
// arena, parameters, gradients, batch inputs, and the host region offload_residual's copies live in),
// sized from the plan and allocated once in load(); each step's
// kernel is bound once, with its CpuKernelArgs pointing into those buffers, so execute() is a
// loop of indirect calls that never allocates. Asynchronous steps (host copies) run in order like
// the others. Floating tensors are F32 (F64 in gradient checks):
// bf16 weights are upcast when the loader writes them (write_converted).
#pragma once

#include <cstdlib>
#include <memory>
#include <vector>

#include "runtime/backend.h"

namespace surogate::runtime {

// An aligned, zero-initialised host allocation with RAII ownership.
class AlignedBuffer {
public:
  AlignedBuffer() = default;
  AlignedBuffer(size_t bytes, size_t alignment);
  std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }

private:
  struct Free {
    void operator()(std::byte* pointer) const { std::free(pointer); }
  };
  std::unique_ptr<std::byte, Free> data_;
  size_t size_ = 0;
};

class CpuBackend final : public Backend {
public:
  std::string_view name() const override { return "cpu"; }
  void load(const compiler::ExecutionPlan& plan, const graph::OpRegistry& registry) override;
  void write(graph::TensorId tensor, std::span<const std::byte> data) override;
  void read(graph::TensorId tensor, std::span<std::byte> data) const override;
  void execute(std::span<const InputBinding> inputs) override;
  void zero_gradients() override;

  // Writes values stored as `source` dtype (BF16, F16, F32, F64) into a floating tensor,
  // converting to the tensor's dtype: how bf16 checkpoints become fp32 CPU parameters.
  void write_converted(graph::TensorId tensor, DType source, std::span<const std::byte> data);
  // Typed views for tests and the trainer (the tensor's dtype must match T).
  template <typename T>
  std::span<T> view(graph::TensorId tensor) {
    return {static_cast<T*>(address(tensor, sizeof(T))), static_cast<size_t>(type_of(tensor).numel())};
  }

  size_t arena_bytes() const { return arena_.size(); }
  const std::byte* arena_data() const { return arena_.data(); }

private:
  struct BoundStep {
    graph::CpuKernel kernel;
    std::vector<graph::CpuTensorView> inputs;
    std::vector<graph::CpuTensorView> outputs;
    graph::CpuKernelArgs args;
  };

  std::byte* base(compiler::Storage storage) const;
  void* address(graph::TensorId tensor, size_t element_bytes) const;
  const graph::TensorType& type_of(graph::TensorId tensor) const;
  graph::CpuTensorView view_of(graph::TensorId tensor) const;
  void check_loaded() const;

  const compiler::ExecutionPlan* plan_ = nullptr;
  AlignedBuffer arena_;
  AlignedBuffer parameters_;
  AlignedBuffer gradients_;
  AlignedBuffer inputs_;
  AlignedBuffer host_;
  std::vector<BoundStep> steps_;
};

}  // namespace surogate::runtime
