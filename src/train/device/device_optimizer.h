// The optimizer half of the CUDA training device: one implementation per `optimizer` option
// (device_adamw.cpp, device_adamw_8bit.cpp, device_normuon.cpp), each the twin of the CPU
// optimizer of the same name in train/optim/. The training device owns the parameters' bf16
// weights, masters and gradient accumulators; the optimizer owns its state on the device, plus a
// host copy with the CPU optimizer's tensor names, dtypes and shapes, so a checkpoint written on
// one backend resumes on the other.
// Precision options: the masters are fp32 (`master`), or absent with master_dtype bf16 (the
// kernels update the bf16 `weight` in place with stochastic rounding keyed by the run's seed,
// the optimizer step and the parameter's index in the list: core/stochastic_rounding.h); the
// accumulators are fp32 (`gradient`) or bf16 (`gradient_bf16`, gradient_dtype bf16).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "cuda/device_buffer.h"
#include "cuda/host_registration.h"
#include "core/stochastic_rounding.h"
#include "cuda/kernels/adamw.h"
#include "train/optim/adamw_math.h"
#include "train/optim/optimizer.h"

namespace surogate::train {

struct DeviceParameter {
  std::string name;
  int64_t rows = 1;                 // a 1-D parameter has rows = 1 (as ParameterSlot)
  int64_t cols = 0;
  __nv_bfloat16* weight = nullptr;  // the plan's bf16 copy, rewritten from the master each step
  float* master = nullptr;          // null: master_dtype bf16, `weight` is the master
  const float* gradient = nullptr;  // the summed gradient, before clipping (fp32 accumulators) ...
  const __nv_bfloat16* gradient_bf16 = nullptr;  // ... or this (bf16 accumulators)
  bool apply_weight_decay = true;
  bool is_hidden_matrix = false;    // NorMuon orthogonalises only these
  int64_t size() const { return rows * cols; }
};

class DeviceOptimizer {
public:
  virtual ~DeviceOptimizer() = default;
  virtual std::string_view name() const = 0;
  // Host views of the state (filled by download(), sent by upload()).
  virtual std::vector<StateTensor> state_tensors() = 0;
  virtual void upload(cudaStream_t stream) = 0;
  virtual void download(cudaStream_t stream) = 0;
  // One step on `stream`; `clip` is the device scalar every gradient is multiplied by first.
  virtual void step(const OptimizerStep& step, const float* clip, cudaStream_t stream) = 0;
};

// Device bytes the optimizer `config` names will allocate for `parameters` (state, workspaces),
// for the out-of-memory report made before anything is allocated.
size_t device_optimizer_bytes(const Config& config, const std::vector<DeviceParameter>& parameters);
// NorMuon's part beyond its state: the stacked directions and Newton–Schulz workspaces.
size_t device_normuon_workspace_bytes(const std::vector<DeviceParameter>& parameters);

// `parameters` must outlive the optimizer's use of their pointers (the training device's buffers).
// `rounding_seed` keys the stochastic rounding of bf16 masters (the factory passes train_seed).
std::unique_ptr<DeviceOptimizer> make_device_optimizer(const Config& config, std::vector<DeviceParameter> parameters);
std::unique_ptr<DeviceOptimizer> make_device_adamw(std::vector<DeviceParameter> parameters, const AdamWSettings& settings,
                                                   uint64_t rounding_seed = 0);
std::unique_ptr<DeviceOptimizer> make_device_adamw_8bit(std::vector<DeviceParameter> parameters,
                                                        const AdamWSettings& settings, uint64_t rounding_seed = 0);
std::unique_ptr<DeviceOptimizer> make_device_normuon(std::vector<DeviceParameter> parameters,
                                                     const NorMuonSettings& settings, uint64_t rounding_seed = 0);

// The AdamW kernels' coefficients for one step; weight decay (lr · wd) only where `decays`;
// `rounding_key` as cuda::AdamWStep documents (0 with fp32 masters).
inline cuda::AdamWStep adamw_kernel_step(const AdamWSettings& settings, const OptimizerStep& step, bool decays,
                                         uint64_t rounding_key = 0) {
  const AdamWCoefficients c = adamw_coefficients(settings, step);
  return {c.beta1, c.beta2, c.epsilon, c.step_size, c.second_correction,
          decays ? static_cast<float>(step.learning_rate * step.weight_decay) : 0.0f, rounding_key};
}

// The stochastic-rounding key of step `step` for a seed (core/stochastic_rounding.h).
inline uint64_t device_rounding_step_key(uint64_t seed, const OptimizerStep& step) {
  return rounding_step_key(seed, static_cast<uint64_t>(step.step));
}

// cuda::adamw_update for one parameter, with its gradient in whichever dtype it accumulates in;
// `index` is the parameter's position in the optimizer's list (its rounding key).
inline void adamw_parameter_update(const DeviceParameter& p, size_t index, float* first_moment, float* second_moment,
                                   const float* clip, const AdamWSettings& settings, const OptimizerStep& step,
                                   uint64_t rounding_seed, cudaStream_t stream) {
  const uint64_t key = p.master ? 0 : rounding_parameter_key(device_rounding_step_key(rounding_seed, step), index);
  const cuda::AdamWStep kernel_step = adamw_kernel_step(settings, step, p.apply_weight_decay, key);
  if (p.gradient) {
    cuda::adamw_update(p.weight, p.master, first_moment, second_moment, p.gradient, clip, p.size(), kernel_step, stream);
  } else {
    cuda::adamw_update(p.weight, p.master, first_moment, second_moment, p.gradient_bf16, clip, p.size(), kernel_step,
                       stream);
  }
}

// One kind of optimizer state for every tensor, concatenated: a host vector and a device buffer
// of the same layout, each tensor starting 16-byte aligned (the kernels load 16-byte vectors).
template <typename T>
class MirroredState {
public:
  // Reserves `count` elements initialised to `initial`; returns the tensor's offset.
  int64_t add(int64_t count, T initial) {
    const int64_t per_vector = 16 / static_cast<int64_t>(sizeof(T));
    const int64_t offset = static_cast<int64_t>(host_.size());
    host_.resize(static_cast<size_t>(offset + (count + per_vector - 1) / per_vector * per_vector), T{});
    std::fill(host_.begin() + offset, host_.begin() + offset + count, initial);
    return offset;
  }
  // The host copy is page-locked too: checkpoints download it while training waits.
  void allocate() {
    device_ = cuda::DeviceBuffer<T>(host_.size());
    pinned_ = cuda::HostRegistration(host_.data(), host_.size() * sizeof(T));
  }
  T* host(int64_t offset) { return host_.data() + offset; }
  T* device(int64_t offset) { return device_.data() + offset; }
  void upload(cudaStream_t stream) { copy(device_.data(), host_.data(), cudaMemcpyHostToDevice, stream); }
  void download(cudaStream_t stream) { copy(host_.data(), device_.data(), cudaMemcpyDeviceToHost, stream); }

private:
  void copy(T* destination, const T* source, cudaMemcpyKind kind, cudaStream_t stream) {
    if (!host_.empty()) CUDA_CHECK(cudaMemcpyAsync(destination, source, host_.size() * sizeof(T), kind, stream));
  }
  std::vector<T> host_;
  cuda::DeviceBuffer<T> device_;
  cuda::HostRegistration pinned_;  // of host_, which never grows after allocate()
};

}  // namespace surogate::train
