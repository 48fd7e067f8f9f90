// AdamW on the device: fp32 moments, one fused update kernel per tensor (cuda/kernels/adamw.h).
// State tensors as the CPU AdamW: `<name>.exp_avg` and `<name>.exp_avg_sq`, F32 [rows, cols].
#include "train/device/device_optimizer.h"

namespace surogate::train {
namespace {

class DeviceAdamW final : public DeviceOptimizer {
public:
  DeviceAdamW(std::vector<DeviceParameter> parameters, const AdamWSettings& settings, uint64_t rounding_seed)
      : parameters_(std::move(parameters)), settings_(settings), rounding_seed_(rounding_seed) {
    for (const DeviceParameter& parameter : parameters_) {
      offsets_.push_back(first_.add(parameter.size(), 0.0f));
      second_.add(parameter.size(), 0.0f);
    }
    first_.allocate();
    second_.allocate();
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

  void upload(cudaStream_t stream) override {
    first_.upload(stream);
    second_.upload(stream);
  }
  void download(cudaStream_t stream) override {
    first_.download(stream);
    second_.download(stream);
  }

  void step(const OptimizerStep& step, const float* clip, cudaStream_t stream) override {
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
};

}  // namespace

std::unique_ptr<DeviceOptimizer> make_device_adamw(std::vector<DeviceParameter> parameters, const AdamWSettings& settings,
                                                   uint64_t rounding_seed) {
  return std::make_unique<DeviceAdamW>(std::move(parameters), settings, rounding_seed);
}

}  // namespace surogate::train
