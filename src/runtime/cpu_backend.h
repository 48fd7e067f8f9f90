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
#include "runtime/shared_parameters.h"
#include "runtime/step_observer.h"

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
  void copy_within(std::span<const ByteMove> moves) override;
  void execute(std::span<const InputBinding> inputs) override;
  void zero_gradients() override;
  // As execute(), but only the plan's forward steps (those before plan.forward_steps): the forward's
  // outputs bit for bit as execute() leaves them, with no backward, so no gradient is read or
  // written (a preference run's reference and evaluation passes, train/objective/).
  void execute_forward(std::span<const InputBinding> inputs);

  // Before load(): every parameter (or constant) of the next plan that `owner`'s loaded plan also
  // has, by name, dtype and shape, is read and written in place in `owner`'s memory instead of a
  // copy of its own (CudaBackend::share_parameters_with's rule: the weights held once by two
  // plans of one model, e.g. generation's decode and prefill plans, which also share their KV
  // caches that way); the rest get their own zeroed memory. `owner` must stay loaded while this
  // backend runs.
  // `shareable` (when given) limits the sharing to the tensors it accepts, by name.
  void share_parameters_with(const CpuBackend& owner, ShareableParameter shareable = {});

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
  std::byte* arena_data() { return arena_.data(); }

  // Called around every step of execute() while set (nullptr: none); must outlive its use.
  void set_step_observer(StepObserver* observer) { observer_ = observer; }

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
  void run_steps(size_t count);

  // Allocates parameters_: the whole Parameters region, or with an owner only the tensors it
  // does not share, filling parameter_addresses_.
  void place_parameters(const compiler::ExecutionPlan& plan);

  const compiler::ExecutionPlan* plan_ = nullptr;
  AlignedBuffer arena_;
  AlignedBuffer parameters_;
  const CpuBackend* parameter_owner_ = nullptr;
  ShareableParameter shareable_;
  // Per TensorId, filled only with a parameter owner: where each Parameters-region tensor lives
  // (in the owner's memory, or in parameters_).
  std::vector<std::byte*> parameter_addresses_;
  AlignedBuffer gradients_;
  AlignedBuffer inputs_;
  AlignedBuffer host_;
  std::vector<BoundStep> steps_;
  StepObserver* observer_ = nullptr;
};

}  // namespace surogate::runtime
