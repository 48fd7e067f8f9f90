// AdamW on the device: fp32 moments, the fused update kernel (cuda/kernels/adamw.h) over every
// tensor in one launch when the masters are fp32 (adamw_update_tensors), else one launch per
// tensor (bf16 masters: each tensor's stochastic-rounding key).
// State tensors as the CPU AdamW: `<name>.exp_avg` and `<name>.exp_avg_sq`, F32 [rows, cols].
#include "train/device/device_optimizer.h"

#include <algorithm>
#include <memory>

namespace surogate::train {
namespace {

class DeviceAdamW final : public DeviceOptimizer {
public:
  DeviceAdamW(std::vector<DeviceParameter> parameters, const AdamWSettings& settings, uint64_t rounding_seed,
              const StateMemory& memory)
      : parameters_(std::move(parameters)), settings_(settings), rounding_seed_(rounding_seed) {
    for (const DeviceParameter& parameter : parameters_) {
      offsets_.push_back(first_.add(parameter.size(), 0.0f));
      second_.add(parameter.size(), 0.0f);
    }
    first_.allocate(memory);
    second_.allocate(memory);
    const bool fp32_masters = std::all_of(parameters_.begin(), parameters_.end(),
                                          [](const DeviceParameter& p) { return p.master != nullptr; });
    if (fp32_masters && !parameters_.empty()) {
      std::vector<cuda::AdamWTensor> tensors;
      for (size_t i = 0; i < parameters_.size(); ++i) {
        const DeviceParameter& p = parameters_[i];
        tensors.push_back({.params = p.weight, .master = p.master, .first_moment = first_.device(offsets_[i]),
                           .second_moment = second_.device(offsets_[i]), .grad = p.gradient,
                           .grad_bf16 = p.gradient_bf16, .count = p.size(), .decays = p.apply_weight_decay});
      }
      table_ = std::make_unique<cuda::AdamWTensorTable>(std::move(tensors));
    }
  }

  std::string_view name() const override { return "adamw"; }

  std::vector<StateTensor> state_tensors() override {
    std::vector<StateTensor> tensors;
    for (size_t i = 0; i < parameters_.size(); ++i) {
      const DeviceParameter& p = parameters_[i];
      const size_t bytes = static_cast<size_t>(p.size()) * sizeof(float);
      tensors.push_back({p.name + ".exp_avg", DType::F32, {p.rows, p.cols}, first_.host(offsets_[i]), bytes});
      tensors.push_back({p.name + ".exp_avg_sq", DType::F32, {p.rows, p.cols}, second_.host(offsets_[i]), bytes});
    }
    return tensors;
  }

  void upload(cudaStream_t stream) override { upload_states(stream, first_, second_); }
  void download(cudaStream_t stream) override { download_states(stream, first_, second_); }

  void step(const OptimizerStep& step, const float* clip, cudaStream_t stream) override {
    if (table_) {
      cuda::adamw_update_tensors(*table_, clip, adamw_kernel_step(settings_, step, true), stream);
      return;
    }
    for (size_t i = 0; i < parameters_.size(); ++i) {
      adamw_parameter_update(parameters_[i], i, first_.device(offsets_[i]), second_.device(offsets_[i]), clip, settings_,
                             step, rounding_seed_, stream);
    }
  }

private:
  std::vector<DeviceParameter> parameters_;
  AdamWSettings settings_;
  uint64_t rounding_seed_;
  MirroredState<float> first_, second_;
  std::vector<int64_t> offsets_;
  std::unique_ptr<cuda::AdamWTensorTable> table_;  // fp32 masters: every tensor in one launch
};

}  // namespace

std::unique_ptr<DeviceOptimizer> make_device_adamw(std::vector<DeviceParameter> parameters, const AdamWSettings& settings,
                                                   uint64_t rounding_seed, const StateMemory& memory) {
  return std::make_unique<DeviceAdamW>(std::move(parameters), settings, rounding_seed, memory);
}

}  // namespace surogate::train
