// A CUDA rank's flat layout of trainable tensors; see trainable_layout.h.
#include "train/device/cuda_rank/trainable_layout.h"

#include "core/error.h"

namespace surogate::train {
namespace {

// Offsets are rounded up to 4 elements (trainable_layout.h says why).
int64_t aligned_to_vectors(int64_t count) { return (count + 3) / 4 * 4; }

}  // namespace

std::vector<size_t> CudaTrainableLayout::unit_sizes() const {
  std::vector<size_t> sizes;
  for (size_t i = 0; i < entries.size(); ++i) {
    const int64_t end = i + 1 < entries.size() ? entries[i + 1].offset : total;
    sizes.push_back(static_cast<size_t>(end - entries[i].offset));
  }
  return sizes;
}

std::vector<TrainableExtent> CudaTrainableLayout::extents(size_t first, size_t end) const {
  const std::vector<size_t> sizes = unit_sizes();
  std::vector<TrainableExtent> result;
  for (size_t i = first; i < end; ++i) {
    result.push_back({entries[i].offset, static_cast<int64_t>(sizes[i]), entries[i].count});
  }
  return result;
}

FlatRun CudaTrainableLayout::run(size_t first, size_t end, bool whole) const {
  if (whole) return {0, entries.size(), 0, total};
  const int64_t base = first < entries.size() ? entries[first].offset : total;
  return {first, end, base, (end < entries.size() ? entries[end].offset : total) - base};
}

CudaTrainableLayout cuda_trainable_layout(const compiler::ExecutionPlan& plan,
                                          std::span<const models::ParameterSpec> specs) {
  CudaTrainableLayout layout;
  for (size_t index = 0; index < specs.size(); ++index) {
    const models::ParameterSpec& spec = specs[index];
    graph::TensorId id = plan.tensor(spec.name);
    const graph::TensorType& type = plan.graph.tensor(id).type;
    if (type.dtype != DType::BF16 && type.dtype != DType::F16) {
      fail_user("the CUDA trainer needs a bf16 or fp16 plan, but parameter '{}' is {}", spec.name,
                dtype_safetensors_name(type.dtype));
    }
    if (index > 0 && type.dtype != layout.dtype) {
      fail_user("the CUDA trainer needs every parameter in one 16-bit dtype, but parameter '{}' is {} and '{}' {}",
                spec.name, dtype_safetensors_name(type.dtype), specs.front().name,
                dtype_safetensors_name(layout.dtype));
    }
    layout.dtype = type.dtype;
    layout.ids.push_back(id);
    auto gradient = plan.parameter_gradients.find(id);
    if (gradient == plan.parameter_gradients.end()) continue;  // frozen (LoRA base)
    layout.entries.push_back({index, id, gradient->second, layout.total, type.numel()});
    layout.total += aligned_to_vectors(type.numel());
  }
  SUROGATE_CHECK(!layout.entries.empty(), "the model has trainable parameters");
  return layout;
}

CudaHostWeights cuda_host_weights(std::span<const models::ParameterSpec> specs, const CudaTrainableLayout& layout) {
  CudaHostWeights host;
  host.values.reserve(specs.size());
  for (const models::ParameterSpec& spec : specs) {
    const auto count = static_cast<size_t>(graph::shape_numel(spec.shape));
    host.values.push_back(std::make_unique_for_overwrite<float[]>(count));
    host.weights.push_back({spec.name, spec.shape, std::span<float>(host.values.back().get(), count)});
  }
  for (const CudaTrainable& entry : layout.entries) {
    host.trainable.push_back(host.weights[entry.weight]);
    host.pinned.emplace_back(host.trainable.back().values.data(), host.trainable.back().values.size_bytes());
  }
  return host;
}

}  // namespace surogate::train
