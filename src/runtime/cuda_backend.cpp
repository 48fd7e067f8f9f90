// CudaBackend: binder check, memory check and allocation, kernel binding at load time; an
// execute() that only enqueues work on one stream, eagerly or as one captured CUDA graph.
#include "runtime/cuda_backend.h"
#include "runtime/byte_moves.h"
#include "runtime/shared_parameters.h"
#include "runtime/upload_ranges.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "core/error.h"
#include "cuda/kernels/range_copy.h"

namespace surogate::runtime {

using namespace surogate::graph;
using compiler::Storage;

namespace {

std::string format_bytes(size_t bytes) {
  return fmt::format("{} bytes ({:.2f} MiB)", bytes, static_cast<double>(bytes) / (1024.0 * 1024.0));
}

}  // namespace

void CudaBackend::PinnedFree::operator()(std::byte* pointer) const {
  if (pointer) cudaFreeHost(pointer);  // at teardown: nothing to do about a failure
}

CudaBackend::CudaBackend(const CudaOpTable& table) : table_(table) {}

CudaBackend::~CudaBackend() {
  if (stream_) cudaStreamSynchronize(stream_->get());  // let queued kernels finish before freeing
  destroy_graph();
}

void CudaBackend::destroy_graph() {
  // At teardown and re-load: nothing useful to do about a failure.
  if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
  if (graph_) cudaGraphDestroy(graph_);
  graph_exec_ = nullptr;
  graph_ = nullptr;
}

void CudaBackend::set_fp8_delayed_sites(std::vector<bool> sites) {
  check_loaded();
  if (resources_->set_fp8_delayed(std::move(sites))) destroy_graph();  // an in-flight replay still completes
}

void CudaBackend::check_loaded() const { SUROGATE_CHECK(plan_ != nullptr, "CudaBackend used before load()"); }

void CudaBackend::check_bindable(const compiler::ExecutionPlan& plan) const {
  std::set<std::string> missing;
  std::string first_node;
  for (const compiler::PlanStep& step : plan.steps) {
    if (step.asynchronous) continue;  // host copies: cuda_host_copies.h
    const Node& node = plan.graph.node(step.node);
    if (table_.find(node.op) == nullptr && missing.insert(node.op).second && first_node.empty()) first_node = node.name;
  }
  if (!missing.empty()) {
    fail_user("the CUDA backend has no kernel for op{} {} (first used by node '{}'); ops with CUDA kernels: {}. "
              "Run this plan on the CPU backend, or add a CUDA binder for the op in src/runtime/",
              missing.size() > 1 ? "s" : "", fmt::join(missing, ", "), first_node, fmt::join(table_.names(), ", "));
  }
}

void CudaBackend::share_activation_memory_with(CudaBackend& owner) {
  owner.check_loaded();
  SUROGATE_CHECK(&owner != this, "a CudaBackend cannot share its activation memory with itself");
  activation_owner_ = &owner;
}

void CudaBackend::share_parameters_with(const CudaBackend& owner, ShareableParameter shareable) {
  owner.check_loaded();
  SUROGATE_CHECK(&owner != this, "a CudaBackend cannot share parameters with itself");
  parameter_owner_ = &owner;
  shareable_ = std::move(shareable);
}

size_t CudaBackend::place_parameters(const compiler::ExecutionPlan& plan) {
  parameter_addresses_.clear();
  own_parameter_offsets_.clear();
  if (parameter_owner_ == nullptr) return plan.memory.parameter_bytes;
  const SharedParameters placed = share_parameters(plan, *parameter_owner_->plan_, shareable_);
  parameter_addresses_.assign(plan.graph.tensors.size(), nullptr);
  for (const auto& [id, theirs] : placed.shared) parameter_addresses_[static_cast<size_t>(id)] = parameter_owner_->address(theirs);
  own_parameter_offsets_ = placed.own;
  return placed.own_bytes;
}

void CudaBackend::allocate(const compiler::ExecutionPlan& plan) {
  const compiler::MemoryPlan& memory = plan.memory;
  int device_count = 0;
  cudaError_t status = cudaGetDeviceCount(&device_count);
  if (status != cudaSuccess || device_count == 0) {
    fail_user("the CUDA backend needs a GPU, but none is usable: {}",
              status != cudaSuccess ? cudaGetErrorString(status) : "no CUDA device found");
  }
  CUDA_CHECK(cudaGetDevice(&memory_.device));
  // Release what an earlier load() held before measuring what is free.
  arena_ = {};
  borrowed_arena_ = nullptr;
  parameters_ = {};
  gradients_ = {};
  inputs_ = {};
  host_ = {};
  const size_t alignment = memory.alignment;
  size_t arena = compiler::align_up(memory.arena_bytes, alignment);
  if (activation_owner_ != nullptr && arena <= activation_owner_->arena_.bytes()) {
    borrowed_arena_ = activation_owner_->arena_.data();
    arena = 0;
  }
  const size_t parameters = compiler::align_up(place_parameters(plan), alignment);
  const size_t gradients = compiler::align_up(memory.gradient_bytes, alignment);
  const size_t inputs = compiler::align_up(memory.input_bytes, alignment);
  memory_.required_bytes = arena + parameters + gradients + inputs;
  CUDA_CHECK(cudaMemGetInfo(&memory_.free_bytes, &memory_.total_bytes));
  if (memory_.required_bytes > memory_.free_bytes) {
    fail_user("the plan needs {} of GPU memory (activation arena {}, parameters {}, gradients {}, inputs {}), but "
              "GPU {} has only {} free of {}. Reduce the micro-batch or sequence length, or enable recompute",
              format_bytes(memory_.required_bytes), format_bytes(arena), format_bytes(parameters),
              format_bytes(gradients), format_bytes(inputs), memory_.device, format_bytes(memory_.free_bytes),
              format_bytes(memory_.total_bytes));
  }
  stream_.emplace();
  staged_.emplace(false);
  staged_pending_ = false;
  arena_ = cuda::DeviceBuffer<std::byte>(arena);
  parameters_ = cuda::DeviceBuffer<std::byte>(parameters);
  gradients_ = cuda::DeviceBuffer<std::byte>(gradients);
  inputs_ = cuda::DeviceBuffer<std::byte>(inputs);
  for (auto* buffer : {&arena_, &parameters_, &gradients_, &inputs_}) buffer->zero(stream_->get());
  for (const auto& [id, offset] : own_parameter_offsets_) parameter_addresses_[id] = parameters_.data() + offset;
  try {
    host_ = cuda::PinnedHostBuffer<std::byte>(memory.host_bytes);
  } catch (const cuda::CudaError& error) {
    cudaGetLastError();  // not a sticky error: clear it
    fail_user("the plan's host region (offload_residual: the residual checkpoints between forward and backward) "
              "needs {} of pinned host memory, and the host refused it ({}). Free host memory or set "
              "offload_residual: false", format_bytes(memory.host_bytes), error.what());
  }
  memory_.host_bytes = host_.bytes();
  staging_.reset();
  if (inputs > 0) {
    void* pinned = nullptr;
    CUDA_CHECK(cudaMallocHost(&pinned, inputs));
    staging_.reset(static_cast<std::byte*>(pinned));
  }
  stream_->synchronize();
}

std::byte* CudaBackend::base(Storage storage) const {
  switch (storage) {
    case Storage::Arena: return borrowed_arena_ != nullptr ? borrowed_arena_ : const_cast<std::byte*>(arena_.data());
    case Storage::Parameters: return const_cast<std::byte*>(parameters_.data());
    case Storage::Gradients: return const_cast<std::byte*>(gradients_.data());
    case Storage::Inputs: return const_cast<std::byte*>(inputs_.data());
    case Storage::Host: return const_cast<std::byte*>(host_.data());
  }
  return nullptr;
}

const TensorType& CudaBackend::type_of(TensorId tensor) const {
  check_loaded();
  return plan_->graph.tensor(tensor).type;
}

std::byte* CudaBackend::address(TensorId tensor) const {
  check_loaded();
  const compiler::TensorPlacement& placement = plan_->placement(tensor);
  if (placement.storage == Storage::Parameters && !parameter_addresses_.empty()) return parameter_addresses_[tensor];
  return base(placement.storage) + placement.offset;
}

CudaTensorView CudaBackend::view_of(TensorId tensor) const {
  const TensorType& type = type_of(tensor);
  return CudaTensorView{address(tensor), type.dtype, type.shape.data(), static_cast<int>(type.shape.size()),
                        type.numel()};
}

void CudaBackend::load(const compiler::ExecutionPlan& plan, const OpRegistry& registry) {
  check_bindable(plan);  // before the device is touched: a plan the table cannot run is refused at once
  // The graph holds the old plan's addresses: wait for its last launch, then drop it before the
  // regions it points into are freed.
  if (stream_) stream_->synchronize();
  destroy_graph();
  warmed_up_ = false;
  graph_failed_ = false;
  graph_launched_ = false;
  plan_ = nullptr;
  steps_.clear();
  allocate(plan);
  plan_ = &plan;
  try {
    resources_ = std::make_unique<CudaResources>();
    bind_steps(registry);
    allocate_scratch();
    host_copies_.prepare(plan, [this](TensorId id) { return address(id); });
  } catch (...) {
    plan_ = nullptr;  // a half-bound plan must not run
    steps_.clear();
    throw;
  }
}

void CudaBackend::allocate_scratch() {
  const size_t request = resources_->scratch_request();
  const CudaResources* owner = activation_owner_ != nullptr ? activation_owner_->resources_.get() : nullptr;
  if (owner != nullptr && request <= owner->scratch_bytes()) {
    resources_->borrow_scratch(owner->scratch(), owner->scratch_bytes());
  } else {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (request > free_bytes) {
      fail_user("the plan's kernels need {} of GPU scratch (the largest step's temporaries: fp32 weight-gradient "
                "accumulators, attention workspace, LM-head logits chunk) after the plan's {} were allocated, but GPU "
                "{} has only {} free. Reduce the micro-batch or sequence length, or raise lmhead_chunks",
                format_bytes(request), format_bytes(memory_.required_bytes), memory_.device, format_bytes(free_bytes));
    }
    resources_->allocate_scratch();
  }
  memory_.scratch_bytes = resources_->owned_scratch_bytes();
  step_events_.clear();
  if (time_breakdown_) {
    for (size_t i = 0; i <= steps_.size(); ++i) step_events_.emplace_back(true);
  }
}

void CudaBackend::set_time_breakdown(bool enabled) {
  time_breakdown_ = enabled;
  step_events_.clear();
  if (enabled && plan_ != nullptr) {
    for (size_t i = 0; i <= steps_.size(); ++i) step_events_.emplace_back(true);
  }
}

void CudaBackend::set_cuda_graphs(bool enabled) { cuda_graphs_ = enabled; }

std::vector<std::pair<std::string, double>> CudaBackend::time_breakdown() const {
  check_loaded();
  SUROGATE_CHECK(time_breakdown_ && step_events_.size() == steps_.size() + 1,
                 "time_breakdown() needs set_time_breakdown(true) before execute()");
  step_events_.back().synchronize();
  std::map<std::string, double> by_op;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Node& node = plan_->graph.node(plan_->steps[i].node);
    const char* phase = node.phase == NodePhase::Forward ? "forward" : node.phase == NodePhase::Backward ? "backward" : "recompute";
    by_op[fmt::format("{}:{}", phase, node.op)] += step_events_[i + 1].elapsed_ms_since(step_events_[i]);
  }
  std::vector<std::pair<std::string, double>> result(by_op.begin(), by_op.end());
  std::sort(result.begin(), result.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return result;
}

void CudaBackend::bind_steps(const OpRegistry& registry) {
  const compiler::ExecutionPlan& plan = *plan_;
  steps_.reserve(plan.steps.size());
  std::set<TensorId> read;  // what some step, the caller (graph outputs, loss) or the optimizer reads
  for (const compiler::PlanStep& step : plan.steps) {
    const Node& node = plan.graph.node(step.node);
    const std::vector<size_t>& unread = registry.get(node.op).unread_inputs;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (std::find(unread.begin(), unread.end(), i) == unread.end()) read.insert(node.inputs[i]);
    }
  }
  for (TensorId id : plan.graph.outputs) read.insert(id);
  for (const auto& [parameter, gradient] : plan.parameter_gradients) read.insert(gradient);
  read.insert(plan.loss);
  for (const compiler::PlanStep& step : plan.steps) {
    const Node& node = plan.graph.node(step.node);
    registry.get(node.op);  // the op must also be known to the registry the plan was built with
    if (step.asynchronous) {  // a host copy, run by host_copies_
      steps_.emplace_back();
      continue;
    }
    std::vector<TensorType> input_types, output_types;
    BoundStep bound;
    for (TensorId id : node.inputs) {
      input_types.push_back(type_of(id));
      bound.inputs.push_back(view_of(id));
    }
    for (TensorId id : node.outputs) {
      output_types.push_back(type_of(id));
      bound.outputs.push_back(view_of(id));
    }
    CudaBindContext context{node, input_types, output_types,
                            Attrs(node.attrs, fmt::format("node '{}' (op {})", node.name, node.op)), *resources_};
    for (TensorId id : node.outputs) context.outputs_read.push_back(read.contains(id));
    for (TensorId id : node.inputs) context.inputs_parameter.push_back(plan.graph.tensor(id).role == TensorRole::Parameter);
    bound.kernel = (*table_.find(node.op))(context);
    SUROGATE_CHECK(static_cast<bool>(bound.kernel), "CUDA binder of op '{}' returned no kernel", node.op);
    steps_.push_back(std::move(bound));
  }
}

void CudaBackend::check_size(TensorId tensor, size_t bytes, const char* verb) const {
  const TensorType& type = type_of(tensor);
  if (bytes != type.size_bytes()) {
    fail_user("tensor '{}' is {} ({} bytes), {} {} bytes", plan_->graph.tensor(tensor).name, format_type(type),
              type.size_bytes(), verb, bytes);
  }
}

void CudaBackend::write(TensorId tensor, std::span<const std::byte> data) {
  check_size(tensor, data.size(), "got");
  if (data.empty()) return;
  CUDA_CHECK(cudaMemcpyAsync(address(tensor), data.data(), data.size(), cudaMemcpyDefault, stream_->get()));
  stream_->synchronize();  // the caller may reuse `data` at once; writes happen at load, not per step
}

void CudaBackend::read(TensorId tensor, std::span<std::byte> data) const {
  check_size(tensor, data.size(), "asked for");
  if (data.empty()) return;
  CUDA_CHECK(cudaMemcpyAsync(data.data(), address(tensor), data.size(), cudaMemcpyDefault, stream_->get()));
  stream_->synchronize();
}

void CudaBackend::copy_within(std::span<const ByteMove> moves) {
  check_byte_moves(*plan_, moves);
  cuda::RangeCopyBatch batch;
  auto launch = [&] {
    cuda::copy_ranges(batch, stream_->get());
    batch = {};
  };
  for (const ByteMove& move : moves) {
    if (move.bytes == 0) continue;
    std::byte* data = address(move.tensor);
    batch.from[batch.count] = data + move.from;
    batch.to[batch.count] = data + move.to;
    batch.bytes[batch.count] = static_cast<int64_t>(move.bytes);
    batch.largest = std::max(batch.largest, static_cast<int64_t>(move.bytes));
    if (++batch.count == cuda::RangeCopyBatch::kMaxRanges) launch();
  }
  launch();
  // Done when it returns: another plan's backend (its own stream) reads what was copied next.
  stream_->synchronize();
}

void CudaBackend::upload_inputs(std::span<const InputBinding> inputs, cudaStream_t stream) {
  if (inputs.empty()) return;
  // The staging buffer is still the source of the previous execute's upload until that copy
  // has run; it ran before the previous step's kernels, so this wait is normally immediate.
  if (staged_pending_) staged_->synchronize();
  std::vector<ByteRange> bound;
  for (const InputBinding& input : inputs) {
    check_size(input.tensor, input.data.size(), "got");
    const compiler::TensorPlacement& placement = plan_->placement(input.tensor);
    if (placement.storage != Storage::Inputs) {
      fail_user("execute(): tensor '{}' is not a graph input; use write() for parameters",
                plan_->graph.tensor(input.tensor).name);
    }
    if (input.data.empty()) continue;
    std::memcpy(staging_.get() + placement.offset, input.data.data(), input.data.size());
    bound.push_back({placement.offset, placement.offset + input.data.size()});
  }
  // The staging buffer mirrors the inputs region: the bound inputs go up in as few copies as the
  // unbound ones between them allow (upload_ranges.h).
  std::vector<ByteRange> unbound;
  for (TensorId id : plan_->graph.inputs) {  // a handful: no per-call table over every tensor
    const bool given = std::any_of(inputs.begin(), inputs.end(),
                                   [id](const InputBinding& input) { return input.tensor == id && !input.data.empty(); });
    const compiler::TensorPlacement& placement = plan_->placement(id);
    if (given || placement.storage != Storage::Inputs) continue;
    unbound.push_back({placement.offset, placement.offset + plan_->graph.tensor(id).type.size_bytes()});
  }
  std::byte* region = base(Storage::Inputs);
  for (const ByteRange& range : upload_ranges(std::move(bound), unbound)) {
    CUDA_CHECK(cudaMemcpyAsync(region + range.begin, staging_.get() + range.begin, range.end - range.begin,
                               cudaMemcpyHostToDevice, stream));
  }
  staged_->record(stream);
  staged_pending_ = true;
}

void CudaBackend::execute_forward(std::span<const InputBinding> inputs) {
  check_loaded();
  for (size_t i = 0; i < plan_->forward_steps; ++i) {
    SUROGATE_CHECK(!plan_->steps[i].asynchronous || plan_->steps[i].complete_by < plan_->forward_steps,
                   "execute_forward(): step {} is a copy that completes in the backward", i);
  }
  cudaStream_t stream = stream_->get();
  upload_inputs(inputs, stream);
  graph_launched_ = false;
  for (size_t i = 0; i < plan_->forward_steps; ++i) {
    if (observer_ != nullptr) observer_->before_step(i);
    if (!host_copies_.launch(i, stream)) steps_[i].kernel(CudaKernelArgs{steps_[i].inputs, steps_[i].outputs, stream});
    if (observer_ != nullptr) observer_->after_step(i);
  }
}

void CudaBackend::execute(std::span<const InputBinding> inputs) {
  check_loaded();
  cudaStream_t stream = stream_->get();
  upload_inputs(inputs, stream);
  graph_launched_ = false;
  const bool timed = time_breakdown_ && step_events_.size() == steps_.size() + 1;
  if (timed || observer_ != nullptr) {
    if (timed) step_events_[0].record(stream);
    for (size_t i = 0; i < steps_.size(); ++i) {
      if (observer_ != nullptr) observer_->before_step(i);
      if (!host_copies_.launch(i, stream)) steps_[i].kernel(CudaKernelArgs{steps_[i].inputs, steps_[i].outputs, stream});
      if (observer_ != nullptr) observer_->after_step(i);
      if (timed) step_events_[i + 1].record(stream);
    }
    warmed_up_ = true;
    return;
  }
  // The graph replays the kernels with the arguments they had at capture: every address is fixed
  // after load() (regions, scratch, cuBLASLt workspace) and every per-call value (batch, dropout
  // seed, loss scale) is device memory the steps read, so a replay is the eager run exactly.
  if (cuda_graphs_ && warmed_up_ && !graph_failed_ && (graph_exec_ != nullptr || capture_graph(stream))) {
    CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream));
    graph_launched_ = true;
    return;
  }
  launch_steps(stream);
  warmed_up_ = true;
}

void CudaBackend::launch_steps(cudaStream_t stream) const {
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (!host_copies_.launch(i, stream)) steps_[i].kernel(CudaKernelArgs{steps_[i].inputs, steps_[i].outputs, stream});
  }
}

bool CudaBackend::capture_graph(cudaStream_t stream) {
  std::string failure;
  cudaGraph_t captured = nullptr;
  // Thread-local mode: an unsafe call from this thread while capturing (an allocation, a
  // synchronisation) fails the capture and lands here, while other threads' CUDA calls are left
  // alone. The uploads enqueued before BeginCapture are not part of the graph; they stay ahead of
  // it on the stream.
  cudaError_t status = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (status != cudaSuccess) {
    failure = fmt::format("cudaStreamBeginCapture: {}", cudaGetErrorString(status));
  } else {
    try {
      launch_steps(stream);
    } catch (const std::exception& error) {
      failure = error.what();
    }
    status = cudaStreamEndCapture(stream, &captured);  // always: takes the stream out of capture mode
    if (failure.empty() && status != cudaSuccess) failure = fmt::format("cudaStreamEndCapture: {}", cudaGetErrorString(status));
  }
  if (failure.empty()) {
    status = cudaGraphInstantiate(&graph_exec_, captured, 0);
    if (status != cudaSuccess) {
      graph_exec_ = nullptr;
      failure = fmt::format("cudaGraphInstantiate: {}", cudaGetErrorString(status));
    }
  }
  if (failure.empty()) {
    graph_ = captured;
    return true;
  }
  if (captured) cudaGraphDestroy(captured);
  cudaGetLastError();  // a refused capture leaves its error as the thread's last error: clear it
  graph_failed_ = true;
  fmt::print(stderr, "warning: use_cuda_graphs: capturing the step's kernels into a CUDA graph failed ({}); "
             "running them without a graph from now on\n", failure);
  return false;
}

void CudaBackend::zero_gradients() {
  check_loaded();
  if (gradients_.bytes() > 0) CUDA_CHECK(cudaMemsetAsync(gradients_.data(), 0, gradients_.bytes(), stream_->get()));
}

}  // namespace surogate::runtime
