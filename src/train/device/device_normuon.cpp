// NorMuon on the device, the twin of train/optim/normuon.cpp: hidden 2-D matrices take the
// momentum → Newton–Schulz (cuda/newton_schulz.h, fp32 cuBLAS) → per-row second-moment
// normalisation → RMS-matched update with (cautious) weight decay; every other parameter takes
// AdamW with the same two state buffers. State tensors as the CPU optimizer: `<name>.momentum`
// F32 [rows, cols] and `<name>.second_moment` F32 [rows] (hidden matrices) or [rows, cols].
//
// Hidden matrices of one shape are updated as a group (a LoRA model's hundreds of adapters are a
// handful of shapes): their directions are stacked, Newton–Schulz runs as strided-batched
// products, and each part of the step is one launch per group. A group holds at most
// kGroupValues values, so full fine-tuning's large matrices still go a few at a time.
#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "cuda/kernels/normuon.h"
#include "cuda/newton_schulz.h"
#include "train/device/device_optimizer.h"

namespace surogate::train {
namespace {

constexpr int64_t kGroupValues = int64_t{16} << 20;  // 64 MiB of fp32 direction per group
constexpr int64_t kGroupMatrices = 4096;

bool is_hidden(const DeviceParameter& p) { return p.is_hidden_matrix && p.rows > 1; }

// The hidden matrices' indices, grouped by shape and cut to the group limits.
std::vector<std::vector<size_t>> matrix_groups(const std::vector<DeviceParameter>& parameters) {
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> by_shape;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (is_hidden(parameters[i])) by_shape[{parameters[i].rows, parameters[i].cols}].push_back(i);
  }
  std::vector<std::vector<size_t>> groups;
  for (const auto& [shape, members] : by_shape) {
    const int64_t count = shape.first * shape.second;
    const size_t per_group = static_cast<size_t>(std::clamp<int64_t>(kGroupValues / count, 1, kGroupMatrices));
    for (size_t begin = 0; begin < members.size(); begin += per_group) {
      groups.emplace_back(members.begin() + static_cast<std::ptrdiff_t>(begin),
                          members.begin() + static_cast<std::ptrdiff_t>(std::min(members.size(), begin + per_group)));
    }
  }
  return groups;
}

struct Workspace {
  int64_t values = 0, gram_values = 0, matrices = 0;
};

Workspace workspace_for(const std::vector<DeviceParameter>& parameters,
                        const std::vector<std::vector<size_t>>& groups) {
  Workspace workspace;
  for (const std::vector<size_t>& group : groups) {
    const DeviceParameter& p = parameters[group.front()];
    const int64_t matrices = static_cast<int64_t>(group.size()), side = std::min(p.rows, p.cols);
    workspace.values = std::max(workspace.values, matrices * p.size());
    workspace.gram_values = std::max(workspace.gram_values, matrices * side * side);
    workspace.matrices = std::max(workspace.matrices, matrices);
  }
  return workspace;
}

class DeviceNorMuon final : public DeviceOptimizer {
public:
  DeviceNorMuon(std::vector<DeviceParameter> parameters, const NorMuonSettings& settings, uint64_t rounding_seed,
                const StateMemory& memory)
      : parameters_(std::move(parameters)), settings_(settings), rounding_seed_(rounding_seed) {
    for (const DeviceParameter& p : parameters_) {
      hidden_.push_back(is_hidden(p));
      first_offsets_.push_back(momentum_.add(p.size(), 0.0f));
      second_offsets_.push_back(second_moment_.add(hidden_.back() ? p.rows : p.size(), 0.0f));
    }
    momentum_.allocate(memory);
    second_moment_.allocate(memory);
    const std::vector<std::vector<size_t>> groups = matrix_groups(parameters_);
    const Workspace workspace = workspace_for(parameters_, groups);
    if (workspace.matrices > 0) {
      update_ = cuda::DeviceBuffer<float>(static_cast<size_t>(workspace.values));
      norms_ = cuda::DeviceBuffer<double>(static_cast<size_t>(workspace.matrices));
      newton_schulz_.emplace(workspace.values, workspace.gram_values, workspace.matrices);
    }
    for (const std::vector<size_t>& members : groups) groups_.push_back(make_group(members));
  }

  std::string_view name() const override { return "normuon"; }

  std::vector<StateTensor> state_tensors() override {
    std::vector<StateTensor> tensors;
    for (size_t i = 0; i < parameters_.size(); ++i) {
      const DeviceParameter& p = parameters_[i];
      const int64_t second_count = hidden_[i] ? p.rows : p.size();
      std::vector<int64_t> second_shape = hidden_[i] ? std::vector<int64_t>{p.rows} : std::vector<int64_t>{p.rows, p.cols};
      tensors.push_back({p.name + ".momentum", DType::F32, {p.rows, p.cols}, momentum_.host(first_offsets_[i]),
                         static_cast<size_t>(p.size()) * sizeof(float)});
      tensors.push_back({p.name + ".second_moment", DType::F32, second_shape, second_moment_.host(second_offsets_[i]),
                         static_cast<size_t>(second_count) * sizeof(float)});
    }
    return tensors;
  }

  void upload(cudaStream_t stream) override { upload_states(stream, momentum_, second_moment_); }
  void download(cudaStream_t stream) override { download_states(stream, momentum_, second_moment_); }

  void step(const OptimizerStep& step, const float* clip, cudaStream_t stream) override {
    for (Group& group : groups_) step_group(group, step, clip, stream);
    for (size_t i = 0; i < parameters_.size(); ++i) {
      if (!hidden_[i]) step_adamw(i, step, clip, stream);
    }
  }

private:
  // A group's per-matrix pointer tables, on the device for the kernels.
  struct Group {
    cuda::NorMuonGroup view;
    cuda::DeviceBuffer<float*> momentum, second_moment, master;
    cuda::DeviceBuffer<const float*> grad;
    cuda::DeviceBuffer<const __nv_bfloat16*> grad_bf16;
    cuda::DeviceBuffer<__nv_bfloat16*> params;
    cuda::DeviceBuffer<int> decays;
    cuda::DeviceBuffer<uint32_t> parameter_index;
  };

  Group make_group(const std::vector<size_t>& members) {
    std::vector<float*> momentum, second, master;
    std::vector<const float*> grad;
    std::vector<const __nv_bfloat16*> grad_bf16;
    std::vector<__nv_bfloat16*> params;
    std::vector<int> decays;
    std::vector<uint32_t> parameter_index;
    for (size_t i : members) {
      const DeviceParameter& p = parameters_[i];
      momentum.push_back(momentum_.device(first_offsets_[i]));
      second.push_back(second_moment_.device(second_offsets_[i]));
      master.push_back(p.master);
      grad.push_back(p.gradient);
      grad_bf16.push_back(p.gradient_bf16);
      params.push_back(p.weight);
      decays.push_back(p.apply_weight_decay ? 1 : 0);
      parameter_index.push_back(static_cast<uint32_t>(i));
    }
    // A group's parameters share the training device's precision options: one table each.
    const DeviceParameter& first = parameters_[members.front()];
    Group group;
    group.momentum = cuda::to_device(momentum);
    group.second_moment = cuda::to_device(second);
    if (first.master) group.master = cuda::to_device(master);
    if (first.gradient) group.grad = cuda::to_device(grad);
    else group.grad_bf16 = cuda::to_device(grad_bf16);
    group.params = cuda::to_device(params);
    group.decays = cuda::to_device(decays);
    group.parameter_index = cuda::to_device(parameter_index);
    group.view = {static_cast<int64_t>(members.size()), first.rows, first.cols, group.momentum.data(),
                  group.grad.data(), group.second_moment.data(), group.master.data(), group.params.data(),
                  group.decays.data(), update_.data(), norms_.data(), group.grad_bf16.data(),
                  group.parameter_index.data()};
    return group;
  }

  void step_group(const Group& group, const OptimizerStep& step, const float* clip, cudaStream_t stream) {
    const cuda::NorMuonGroup& g = group.view;
    cuda::normuon_momentum(g, clip, static_cast<float>(settings_.momentum), stream);
    newton_schulz_->orthogonalize(g.update, g.matrices, g.rows, g.cols, stream);
    cuda::normuon_normalize_rows(g, static_cast<float>(settings_.beta2), stream);
    cuda::normuon_apply(g, static_cast<float>(step.learning_rate), static_cast<float>(step.weight_decay),
                        settings_.cautious_weight_decay, device_rounding_step_key(rounding_seed_, step), stream);
  }

  void step_adamw(size_t i, const OptimizerStep& step, const float* clip, cudaStream_t stream) {
    adamw_parameter_update(parameters_[i], i, momentum_.device(first_offsets_[i]),
                           second_moment_.device(second_offsets_[i]), clip, settings_.adamw, step, rounding_seed_, stream);
  }

  std::vector<DeviceParameter> parameters_;
  NorMuonSettings settings_;
  uint64_t rounding_seed_;
  std::vector<bool> hidden_;
  MirroredState<float> momentum_, second_moment_;
  std::vector<int64_t> first_offsets_, second_offsets_;
  cuda::DeviceBuffer<float> update_;   // the stacked direction of the group in hand
  cuda::DeviceBuffer<double> norms_;   // its per-matrix norms
  std::optional<cuda::NewtonSchulz> newton_schulz_;
  std::vector<Group> groups_;
};

}  // namespace

size_t device_normuon_workspace_bytes(const std::vector<DeviceParameter>& parameters) {
  const Workspace workspace = workspace_for(parameters, matrix_groups(parameters));
  // The direction and Newton–Schulz's ping-pong copy, the Gram and polynomial stacks, the norms.
  return static_cast<size_t>(2 * workspace.values + 2 * workspace.gram_values) * sizeof(float) +
         static_cast<size_t>(2 * workspace.matrices) * sizeof(double);
}

std::unique_ptr<DeviceOptimizer> make_device_normuon(std::vector<DeviceParameter> parameters,
                                                     const NorMuonSettings& settings, uint64_t rounding_seed,
                                                     const StateMemory& memory) {
  return std::make_unique<DeviceNorMuon>(std::move(parameters), settings, rounding_seed, memory);
}

}  // namespace surogate::train
