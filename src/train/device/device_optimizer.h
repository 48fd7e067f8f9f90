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

#include "config/sections/optimizer.h"
#include "cuda/device_buffer.h"
#include "cuda/host_buffer.h"
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

// Device bytes the optimizer `optimizer` names will allocate for `parameters` (state, workspaces),
// for the out-of-memory report made before anything is allocated.
size_t device_optimizer_bytes(const config::Optimizer& optimizer, const std::vector<DeviceParameter>& parameters);
// NorMuon's part beyond its state: the stacked directions and Newton–Schulz workspaces.
size_t device_normuon_workspace_bytes(const std::vector<DeviceParameter>& parameters);

// A GPU slot the state of a staged optimizer (offload_optimizer without use_zero_copy:
// staged_optimizer.h) is copied into for its step: reserve() hands out 256-byte aligned room and
// records which host array each part mirrors, for the copies in and out.
class StagingArena {
public:
  StagingArena(std::byte* base, size_t capacity) : base_(base), capacity_(capacity) {}
  struct Region {
    void* host;
    void* device;
    size_t bytes;
  };
  void* reserve(void* host, size_t bytes);
  const std::vector<Region>& regions() const { return regions_; }

private:
  std::byte* base_;
  size_t capacity_;
  size_t used_ = 0;
  std::vector<Region> regions_;
};

// Where an optimizer keeps its state (host_offload_plan.h):
//   Device      on the GPU, with a host mirror that checkpoints read and write (the default);
//   HostMapped  in pinned host memory that the kernels address through the mapping
//               (offload_optimizer with use_zero_copy);
//   HostStaged  in pinned host memory, copied into `staging` around each step (offload_optimizer).
struct StateMemory {
  enum class Place { Device, HostMapped, HostStaged };
  Place place = Place::Device;
  bool write_combined = false;
  StagingArena* staging = nullptr;  // HostStaged only
};

// `parameters` must outlive the optimizer's use of their pointers (the training device's buffers).
// `rounding_seed` keys the stochastic rounding of bf16 masters (the callers pass train_seed).
std::unique_ptr<DeviceOptimizer> make_device_optimizer(const config::Optimizer& optimizer, uint64_t rounding_seed,
                                                       std::vector<DeviceParameter> parameters,
                                                       const StateMemory& memory = {});
std::unique_ptr<DeviceOptimizer> make_device_adamw(std::vector<DeviceParameter> parameters, const AdamWSettings& settings,
                                                   uint64_t rounding_seed = 0, const StateMemory& memory = {});
std::unique_ptr<DeviceOptimizer> make_device_adamw_8bit(std::vector<DeviceParameter> parameters,
                                                        const AdamWSettings& settings, uint64_t rounding_seed = 0,
                                                        const StateMemory& memory = {});
std::unique_ptr<DeviceOptimizer> make_device_normuon(std::vector<DeviceParameter> parameters,
                                                     const NorMuonSettings& settings, uint64_t rounding_seed = 0,
                                                     const StateMemory& memory = {});

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

// One kind of optimizer state for every tensor, concatenated, each tensor starting 16-byte aligned
// (the kernels load 16-byte vectors): add() lays it out on the host, allocate() places it as
// `StateMemory` says. host() is what checkpoints read and restore; device() what kernels address.
// upload() / download() copy between the two where they differ (Place::Device); in host memory
// (the offloaded places) the host array is the state itself and they do nothing.
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
  void allocate(const StateMemory& memory = {}) {
    place_ = memory.place;
    if (place_ == StateMemory::Place::Device) {
      device_ = cuda::DeviceBuffer<T>(host_.size());
      // The host mirror is page-locked too: checkpoints download it while training waits.
      registered_ = cuda::HostRegistration(host_.data(), host_.size() * sizeof(T));
      host_base_ = host_.data();
      device_base_ = device_.data();
      return;
    }
    pinned_ = cuda::PinnedHostBuffer<T>(host_.size(), memory.write_combined);
    std::copy(host_.begin(), host_.end(), pinned_.data());
    host_ = {};
    host_base_ = pinned_.data();
    device_base_ = place_ == StateMemory::Place::HostMapped
                       ? pinned_.device_data()
                       : static_cast<T*>(memory.staging->reserve(pinned_.data(), pinned_.bytes()));
  }
  T* host(int64_t offset) { return host_base_ + offset; }
  T* device(int64_t offset) { return device_base_ + offset; }
  void upload(cudaStream_t stream) {
    if (place_ == StateMemory::Place::Device) copy(device_.data(), host_.data(), cudaMemcpyHostToDevice, stream);
  }
  void download(cudaStream_t stream) {
    if (place_ == StateMemory::Place::Device) copy(host_.data(), device_.data(), cudaMemcpyDeviceToHost, stream);
  }

private:
  void copy(T* destination, const T* source, cudaMemcpyKind kind, cudaStream_t stream) {
    if (!host_.empty()) CUDA_CHECK(cudaMemcpyAsync(destination, source, host_.size() * sizeof(T), kind, stream));
  }
  StateMemory::Place place_ = StateMemory::Place::Device;
  std::vector<T> host_;               // the layout while adding; Place::Device: the host mirror
  cuda::PinnedHostBuffer<T> pinned_;  // the host places: the state
  cuda::DeviceBuffer<T> device_;      // Place::Device: the state
  cuda::HostRegistration registered_;  // Place::Device: host_ page-locked (it never grows after allocate())
  T* host_base_ = nullptr;
  T* device_base_ = nullptr;
};

// An optimizer's states, all uploaded or downloaded (their DeviceOptimizer::upload / download).
template <typename... States>
void upload_states(cudaStream_t stream, States&... states) {
  (states.upload(stream), ...);
}
template <typename... States>
void download_states(cudaStream_t stream, States&... states) {
  (states.download(stream), ...);
}

}  // namespace surogate::train
