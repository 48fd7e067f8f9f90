// CpuBackend: allocation and kernel binding at load time, an allocation-free step loop.
#include "runtime/cpu_backend.h"

#include <cstring>
#include <utility>

#include "core/bfloat16.h"
#include "core/error.h"
#include "runtime/byte_moves.h"
#include "runtime/shared_parameters.h"

namespace surogate::runtime {

using namespace surogate::graph;
using compiler::Storage;

AlignedBuffer::AlignedBuffer(size_t bytes, size_t alignment) : size_(bytes) {
  if (bytes == 0) return;
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  data_.reset(static_cast<std::byte*>(std::aligned_alloc(alignment, rounded)));
  if (!data_) fail_user("cannot allocate {} bytes of host memory for the CPU backend", rounded);
  std::memset(data_.get(), 0, rounded);
}

void CpuBackend::check_loaded() const { SUROGATE_CHECK(plan_ != nullptr, "CpuBackend used before load()"); }

std::byte* CpuBackend::base(Storage storage) const {
  switch (storage) {
    case Storage::Arena: return arena_.data();
    case Storage::Parameters: return parameters_.data();
    case Storage::Gradients: return gradients_.data();
    case Storage::Inputs: return inputs_.data();
    case Storage::Host: return host_.data();
  }
  return nullptr;
}

const TensorType& CpuBackend::type_of(TensorId tensor) const {
  check_loaded();
  return plan_->graph.tensor(tensor).type;
}

void* CpuBackend::address(TensorId tensor, size_t element_bytes) const {
  const TensorType& type = type_of(tensor);
  if (element_bytes != 0 && element_bytes != dtype_size_bytes(type.dtype)) {
    fail_user("tensor '{}' is {}: cannot access it as {}-byte elements", plan_->graph.tensor(tensor).name,
              format_type(type), element_bytes);
  }
  const compiler::TensorPlacement& placement = plan_->placement(tensor);
  if (placement.storage == Storage::Parameters && !parameter_addresses_.empty()) {
    return parameter_addresses_[static_cast<size_t>(tensor)];
  }
  return base(placement.storage) + placement.offset;
}

void CpuBackend::share_parameters_with(const CpuBackend& owner, ShareableParameter shareable) {
  owner.check_loaded();
  SUROGATE_CHECK(&owner != this, "a CpuBackend cannot share parameters with itself");
  parameter_owner_ = &owner;
  shareable_ = std::move(shareable);
}

void CpuBackend::place_parameters(const compiler::ExecutionPlan& plan) {
  parameter_addresses_.clear();
  if (parameter_owner_ == nullptr) {
    parameters_ = AlignedBuffer(plan.memory.parameter_bytes, plan.memory.alignment);
    return;
  }
  const SharedParameters placed = share_parameters(plan, *parameter_owner_->plan_, shareable_);
  parameter_addresses_.assign(plan.graph.tensors.size(), nullptr);
  for (const auto& [id, theirs] : placed.shared) {
    parameter_addresses_[static_cast<size_t>(id)] = static_cast<std::byte*>(parameter_owner_->address(theirs, 0));
  }
  parameters_ = AlignedBuffer(placed.own_bytes, plan.memory.alignment);
  for (const auto& [id, offset] : placed.own) parameter_addresses_[static_cast<size_t>(id)] = parameters_.data() + offset;
}

CpuTensorView CpuBackend::view_of(TensorId tensor) const {
  const TensorType& type = type_of(tensor);
  return CpuTensorView{address(tensor, 0), type.dtype, type.shape.data(), static_cast<int>(type.shape.size()),
                       type.numel()};
}

void CpuBackend::load(const compiler::ExecutionPlan& plan, const OpRegistry& registry) {
  plan_ = &plan;
  const compiler::MemoryPlan& memory = plan.memory;
  arena_ = AlignedBuffer(memory.arena_bytes, memory.alignment);
  place_parameters(plan);
  gradients_ = AlignedBuffer(memory.gradient_bytes, memory.alignment);
  inputs_ = AlignedBuffer(memory.input_bytes, memory.alignment);
  host_ = AlignedBuffer(memory.host_bytes, memory.alignment);
  steps_.clear();
  steps_.reserve(plan.steps.size());
  for (const compiler::PlanStep& step : plan.steps) {
    const Node& node = plan.graph.node(step.node);
    const OpDef& def = registry.get(node.op);
    if (!def.cpu) fail_user("op '{}' (node '{}') has no CPU kernel", node.op, node.name);
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
    CpuBindContext context{node, input_types, output_types, Attrs(node.attrs, fmt::format("node '{}' (op {})", node.name, node.op))};
    bound.kernel = def.cpu(context);
    SUROGATE_CHECK(static_cast<bool>(bound.kernel), "CPU binder of op '{}' returned no kernel", node.op);
    steps_.push_back(std::move(bound));
  }
  // The views live in steps_ now, which no longer moves: point the args at them.
  for (BoundStep& bound : steps_) bound.args = CpuKernelArgs{bound.inputs, bound.outputs};
}

void CpuBackend::write(TensorId tensor, std::span<const std::byte> data) {
  const TensorType& type = type_of(tensor);
  if (data.size() != type.size_bytes()) {
    fail_user("tensor '{}' is {} ({} bytes), got {} bytes", plan_->graph.tensor(tensor).name, format_type(type),
              type.size_bytes(), data.size());
  }
  std::memcpy(address(tensor, 0), data.data(), data.size());
}

void CpuBackend::read(TensorId tensor, std::span<std::byte> data) const {
  const TensorType& type = type_of(tensor);
  if (data.size() != type.size_bytes()) {
    fail_user("tensor '{}' is {} ({} bytes), asked for {} bytes", plan_->graph.tensor(tensor).name, format_type(type),
              type.size_bytes(), data.size());
  }
  std::memcpy(data.data(), address(tensor, 0), data.size());
}

void CpuBackend::copy_within(std::span<const ByteMove> moves) {
  check_byte_moves(*plan_, moves);
  for (const ByteMove& move : moves) {
    auto* data = static_cast<std::byte*>(address(move.tensor, 0));
    std::memcpy(data + move.to, data + move.from, move.bytes);
  }
}

void CpuBackend::write_converted(TensorId tensor, DType source, std::span<const std::byte> data) {
  const TensorType& type = type_of(tensor);
  const std::string& name = plan_->graph.tensor(tensor).name;
  if (type.dtype == source) return write(tensor, data);
  const size_t count = static_cast<size_t>(type.numel());
  if (data.size() != count * dtype_size_bytes(source)) {
    fail_user("tensor '{}' is {}: expected {} values of {} ({} bytes), got {} bytes", name, format_type(type), count,
              dtype_safetensors_name(source), count * dtype_size_bytes(source), data.size());
  }
  auto load_value = [&](size_t i) -> double {
    const std::byte* at = data.data() + i * dtype_size_bytes(source);
    uint16_t half;
    float single;
    double wide;
    switch (source) {
      case DType::BF16: std::memcpy(&half, at, 2); return bf16_to_float(half);
      case DType::F16: std::memcpy(&half, at, 2); return f16_to_float(half);
      case DType::F32: std::memcpy(&single, at, 4); return single;
      case DType::F64: std::memcpy(&wide, at, 8); return wide;
      default: fail_user("tensor '{}': cannot convert from {}", name, dtype_safetensors_name(source));
    }
  };
  if (type.dtype == DType::F32) {
    float* out = static_cast<float*>(address(tensor, 4));
    for (size_t i = 0; i < count; ++i) out[i] = static_cast<float>(load_value(i));
  } else if (type.dtype == DType::F64) {
    double* out = static_cast<double*>(address(tensor, 8));
    for (size_t i = 0; i < count; ++i) out[i] = load_value(i);
  } else {
    fail_user("tensor '{}' is {}: the CPU backend converts only into F32 or F64 tensors", name, format_type(type));
  }
}

void CpuBackend::execute(std::span<const InputBinding> inputs) {
  check_loaded();
  for (const InputBinding& input : inputs) write(input.tensor, input.data);
  run_steps(steps_.size());
}

void CpuBackend::execute_forward(std::span<const InputBinding> inputs) {
  check_loaded();
  for (const InputBinding& input : inputs) write(input.tensor, input.data);
  run_steps(plan_->forward_steps);
}

void CpuBackend::run_steps(size_t count) {
  if (observer_ == nullptr) {
    for (size_t i = 0; i < count; ++i) steps_[i].kernel(steps_[i].args);
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    observer_->before_step(i);
    steps_[i].kernel(steps_[i].args);
    observer_->after_step(i);
  }
}

void CpuBackend::zero_gradients() {
  check_loaded();
  if (gradients_.size() > 0) std::memset(gradients_.data(), 0, gradients_.size());
}

}  // namespace surogate::runtime
