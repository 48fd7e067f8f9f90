// CudaBackend: runs an ExecutionPlan on the current CUDA device through the same Backend
// interface as CpuBackend. load() checks that every op has a CUDA binder (UserError naming the
// missing ops, before touching the device), checks free device memory against the plan's four
// regions (UserError with required vs free bytes), allocates them once (activation arena,
// parameters + constants, gradients, batch inputs; zeroed; the plan's host region, where
// offload_residual's copies live, in pinned host memory), a pinned staging buffer for inputs
// and one stream, then binds every step. Asynchronous steps (the host copies) are not kernels of
// the table: runtime/cuda_host_copies.h runs them on side streams, overlapping the kernels. execute() stages the given inputs, uploads them and
// launches every step's kernels on that stream without synchronising the host (with
// set_cuda_graphs, from the second execute after load on, as one captured CUDA graph); read()
// is the one place that waits (for the stream, then copies out).
// Core ops run F32 (add / fill / accumulate also BF16); the model ops run BF16 graphs
// (models::DecoderGraphOptions::dtype), see runtime/cuda_model_ops.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cuda/device_buffer.h"
#include "cuda/host_buffer.h"
#include "runtime/backend.h"
#include "runtime/shared_parameters.h"
#include "runtime/cuda_host_copies.h"
#include "runtime/cuda_op_table.h"
#include "runtime/step_observer.h"

namespace surogate::runtime {

// Device memory as load() found it, for reports and the trainer's memory breakdown.
struct DeviceMemoryReport {
  int device = 0;
  size_t required_bytes = 0;  // the four regions together
  size_t scratch_bytes = 0;   // the steps' shared scratch (CudaResources), allocated after binding
  size_t host_bytes = 0;      // the plan's host region, in pinned host memory (offload_residual)
  size_t free_bytes = 0;      // free on the device before allocating
  size_t total_bytes = 0;
};

class CudaBackend final : public Backend {
public:
  // `table` must outlive the backend; the default is the engine's built-in table.
  explicit CudaBackend(const CudaOpTable& table = builtin_cuda_ops());
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  void load(const compiler::ExecutionPlan& plan, const graph::OpRegistry& registry) override;
  void write(graph::TensorId tensor, std::span<const std::byte> data) override;
  void read(graph::TensorId tensor, std::span<std::byte> data) const override;
  void copy_within(std::span<const ByteMove> moves) override;
  void execute(std::span<const InputBinding> inputs) override;
  void zero_gradients() override;
  // As execute(), but only the plan's forward steps (before plan.forward_steps), eagerly (no graph,
  // no timing): the forward's outputs as execute() leaves them, with no backward, so no gradient
  // is read or written. Every asynchronous copy of those steps must complete within them
  // (offload_residual's complete in the backward: a plan with them is refused).
  void execute_forward(std::span<const InputBinding> inputs);

  const DeviceMemoryReport& memory_report() const { return memory_; }

  // Before load(): every parameter (or constant) of the next plan that `owner`'s loaded plan also
  // has, by name, dtype and shape, is read in place from `owner` instead of a copy of its own
  // (the evaluator's forward plan reading the training plan's weights); the rest get their own
  // memory as usual. `owner` must stay loaded while this backend runs; a write() to a shared
  // tensor writes the owner's.
  // `shareable` (when given) limits the sharing to the tensors it accepts, by name.
  void share_parameters_with(const CudaBackend& owner, ShareableParameter shareable = {});
  // Before load(): the activation arena and the steps' scratch are `owner`'s (loaded first) where
  // they fit in it — each region whole, or allocated as usual — instead of memory of this
  // backend's own (the evaluator's forward plan in the training plan's memory, which holds nothing
  // between the training's executes). The two backends must never run at the same time: the
  // caller orders them (the evaluator waits for the training stream, and reads its results back
  // before the training runs again). `owner` must stay loaded while this backend runs.
  void share_activation_memory_with(CudaBackend& owner);
  // Whether the loaded plan's arena is the activation owner's (for tests).
  bool borrows_arena() const { return borrowed_arena_ != nullptr; }

  // debug_time_breakdown: when on, execute() records a CUDA event after every step, and
  // time_breakdown() waits for the stream and returns the milliseconds of each op name summed
  // over the steps of the last execute (phase-prefixed: "forward:linear", "backward:...",
  // "recompute:..."). Off by default: the events cost a little launch overhead.
  void set_time_breakdown(bool enabled);
  std::vector<std::pair<std::string, double>> time_breakdown() const;
  // use_cuda_graphs: when on, execute() replays the steps' kernels as one CUDA graph. The first
  // execute after load() runs eagerly (a warm-up: cuBLASLt plans, kernel attributes and lazily
  // loaded modules are set up there, outside any capture); the next one captures the steps into a
  // graph and launches it, later ones only launch it. Inputs are uploaded before the graph, on the
  // same stream, into the same fixed addresses the graph reads. A capture or instantiation that
  // fails is reported once on stderr and execute() stays eager until the next load(). Ignored
  // (eager, the graph kept) while time_breakdown is on.
  void set_cuda_graphs(bool enabled);
  // Called around every step of execute() while set (nullptr: none; must outlive its use). An
  // execute with an observer runs eagerly: the observer enqueues its own work between the steps
  // (on this stream, or on its own streams ordered by events), decided on the host.
  void set_step_observer(StepObserver* observer) { observer_ = observer; }
  // Whether the last execute() launched the captured graph (for tests and reports).
  bool graph_launched() const { return graph_launched_; }
  // fp8_hybrid: the scaling-state rows the host knows to have a delayed amax (one flag per site,
  // train/device/fp8_delayed_sites.h; CudaResources::fp8_delayed). A change drops the captured
  // graph, whose launches were decided with the old flags; the next execute captures anew.
  void set_fp8_delayed_sites(std::vector<bool> sites);
  cudaStream_t stream() const { return stream_ ? stream_->get() : nullptr; }
  // The device address of a tensor of the loaded plan, for callers that launch their own kernels
  // on stream() (the trainer's gradient accumulation and optimizer step).
  void* device_address(graph::TensorId tensor) const { return address(tensor); }
  // The activation arena's start (ZeRO-3's gather buffers lie at fixed offsets in it).
  std::byte* arena_data() { return borrowed_arena_ != nullptr ? borrowed_arena_ : arena_.data(); }

private:
  struct BoundStep {
    CudaKernel kernel;
    std::vector<CudaTensorView> inputs;
    std::vector<CudaTensorView> outputs;
  };
  // Pinned host memory (cudaMallocHost) with RAII ownership.
  struct PinnedFree {
    void operator()(std::byte* pointer) const;
  };

  void check_bindable(const compiler::ExecutionPlan& plan) const;
  void allocate(const compiler::ExecutionPlan& plan);
  // The size of the plan's own Parameters region. With a parameter owner: the shared tensors'
  // addresses into parameter_addresses_, the others' offsets into own_parameter_offsets_.
  size_t place_parameters(const compiler::ExecutionPlan& plan);
  void bind_steps(const graph::OpRegistry& registry);
  void allocate_scratch();
  std::byte* base(compiler::Storage storage) const;
  std::byte* address(graph::TensorId tensor) const;
  const graph::TensorType& type_of(graph::TensorId tensor) const;
  CudaTensorView view_of(graph::TensorId tensor) const;
  void check_size(graph::TensorId tensor, size_t bytes, const char* verb) const;
  void check_loaded() const;
  void launch_steps(cudaStream_t stream) const;
  void upload_inputs(std::span<const InputBinding> inputs, cudaStream_t stream);
  // Captures launch_steps into graph_ / graph_exec_; false (after one line on stderr, the stream
  // out of capture mode and the error state cleared) when CUDA refuses.
  bool capture_graph(cudaStream_t stream);
  void destroy_graph();

  const CudaOpTable& table_;
  const compiler::ExecutionPlan* plan_ = nullptr;
  DeviceMemoryReport memory_;
  cuda::DeviceBuffer<std::byte> arena_;
  CudaBackend* activation_owner_ = nullptr;  // share_activation_memory_with
  std::byte* borrowed_arena_ = nullptr;      // the owner's arena, when this plan's fits in it
  cuda::DeviceBuffer<std::byte> parameters_;
  const CudaBackend* parameter_owner_ = nullptr;
  ShareableParameter shareable_;
  std::vector<std::byte*> parameter_addresses_;  // per TensorId; filled only with a parameter owner
  std::vector<std::pair<graph::TensorId, size_t>> own_parameter_offsets_;
  cuda::DeviceBuffer<std::byte> gradients_;
  cuda::DeviceBuffer<std::byte> inputs_;
  cuda::PinnedHostBuffer<std::byte> host_;  // the plan's host region
  std::unique_ptr<std::byte, PinnedFree> staging_;  // input_bytes of pinned host memory
  // Created in load(), so a backend can be constructed (and refuse a plan) without a device.
  std::optional<cuda::Stream> stream_;
  std::optional<cuda::Event> staged_;  // recorded after the last upload out of staging_
  bool staged_pending_ = false;
  std::vector<BoundStep> steps_;
  CudaHostCopies host_copies_;  // the asynchronous steps
  std::unique_ptr<CudaResources> resources_;  // created in load(): it needs the device
  bool time_breakdown_ = false;
  std::vector<cuda::Event> step_events_;  // steps + 1 when time_breakdown_
  bool cuda_graphs_ = false;
  StepObserver* observer_ = nullptr;
  bool warmed_up_ = false;     // an eager execute ran since load()
  bool graph_failed_ = false;  // capture was refused since load(): stay eager
  bool graph_launched_ = false;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t graph_exec_ = nullptr;
};

}  // namespace surogate::runtime
