// NorMuon on the device, the twin of train/optim/normuon.cpp: hidden 2-D matrices take the
// momentum → Newton–Schulz (cuda/newton_schulz.h, fp32 cuBLAS) → per-row second-moment
// normalisation → RMS-matched update with (cautious) weight decay; every other parameter takes
// AdamW with the same two state buffers. State tensors as the CPU optimizer: `<name>.momentum`
// F32 [rows, cols] and `<name>.second_moment` F32 [rows] (hidden matrices) or [rows, cols].
#include <algorithm>
#include <optional>

#include "cuda/kernels/adamw.h"
#include "cuda/kernels/normuon.h"
#include "cuda/newton_schulz.h"
#include "train/device/device_optimizer.h"
#include "train/optim/adamw_math.h"

namespace surogate::train {
namespace {

class DeviceNorMuon final : public DeviceOptimizer {
public:
  DeviceNorMuon(std::vector<DeviceParameter> parameters, const NorMuonSettings& settings)
      : parameters_(std::move(parameters)), settings_(settings) {
    int64_t largest = 0, largest_small_side = 0;
    for (const DeviceParameter& p : parameters_) {
      const bool hidden = p.is_hidden_matrix && p.rows > 1;
      hidden_.push_back(hidden);
      first_offsets_.push_back(momentum_.add(p.size(), 0.0f));
      second_offsets_.push_back(second_moment_.add(hidden ? p.rows : p.size(), 0.0f));
      if (hidden) {
        largest = std::max(largest, p.size());
        largest_small_side = std::max(largest_small_side, std::min(p.rows, p.cols));
      }
    }
    momentum_.allocate();
    second_moment_.allocate();
    if (largest > 0) {
      update_ = cuda::DeviceBuffer<float>(static_cast<size_t>(largest));
      norm_squared_ = cuda::DeviceBuffer<double>(1);
      newton_schulz_.emplace(largest, largest_small_side);
    }
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

  void upload(cudaStream_t stream) override {
    momentum_.upload(stream);
    second_moment_.upload(stream);
  }
  void download(cudaStream_t stream) override {
    momentum_.download(stream);
    second_moment_.download(stream);
  }

  void step(const OptimizerStep& step, const float* clip, cudaStream_t stream) override {
    for (size_t i = 0; i < parameters_.size(); ++i) {
      if (hidden_[i]) step_matrix(i, step, clip, stream); else step_adamw(i, step, clip, stream);
    }
  }

private:
  void step_matrix(size_t i, const OptimizerStep& step, const float* clip, cudaStream_t stream) {
    const DeviceParameter& p = parameters_[i];
    float* momentum = momentum_.device(first_offsets_[i]);
    cuda::normuon_momentum(momentum, update_.data(), p.gradient, clip, p.size(),
                           static_cast<float>(settings_.momentum), stream);
    newton_schulz_->orthogonalize(update_.data(), p.rows, p.cols, stream);
    cuda::normuon_normalize_rows(update_.data(), second_moment_.device(second_offsets_[i]), p.rows, p.cols,
                                 static_cast<float>(settings_.beta2), norm_squared_.data(), stream);
    const float decay = p.apply_weight_decay ? static_cast<float>(step.weight_decay) : 0.0f;
    cuda::normuon_apply(p.weight, p.master, update_.data(), p.rows, p.cols, norm_squared_.data(),
                        static_cast<float>(step.learning_rate), decay, settings_.cautious_weight_decay, stream);
  }

  void step_adamw(size_t i, const OptimizerStep& step, const float* clip, cudaStream_t stream) {
    const DeviceParameter& p = parameters_[i];
    AdamWCoefficients c = adamw_coefficients(settings_.adamw, step);
    cuda::AdamWStep kernel_step{c.beta1, c.beta2, c.epsilon, c.step_size, c.second_correction,
                                p.apply_weight_decay ? static_cast<float>(step.learning_rate * step.weight_decay) : 0.0f};
    cuda::adamw_update(p.weight, p.master, momentum_.device(first_offsets_[i]), second_moment_.device(second_offsets_[i]),
                       p.gradient, clip, p.size(), kernel_step, stream);
  }

  std::vector<DeviceParameter> parameters_;
  NorMuonSettings settings_;
  std::vector<bool> hidden_;
  MirroredState<float> momentum_, second_moment_;
  std::vector<int64_t> first_offsets_, second_offsets_;
  cuda::DeviceBuffer<float> update_;          // the orthogonalised direction of the matrix in hand
  cuda::DeviceBuffer<double> norm_squared_;
  std::optional<cuda::NewtonSchulz> newton_schulz_;
};

}  // namespace

std::unique_ptr<DeviceOptimizer> make_device_normuon(std::vector<DeviceParameter> parameters,
                                                     const NorMuonSettings& settings) {
  return std::make_unique<DeviceNorMuon>(std::move(parameters), settings);
}

}  // namespace surogate::train
