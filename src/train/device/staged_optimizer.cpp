// The staged optimizer step; see staged_optimizer.h.
#include "train/device/staged_optimizer.h"

#include <algorithm>
#include <array>
#include <string>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"

namespace surogate::train {
namespace {

class StagedOptimizer final : public DeviceOptimizer {
public:
  StagedOptimizer(const config::Optimizer& optimizer, uint64_t seed, std::vector<DeviceParameter> parameters,
                  const HostOffloadPlan& plan, float* host_masters)
      : plan_(plan), host_masters_(host_masters), start_(false), loaded_{cuda::Event(false), cuda::Event(false)}, stepped_{cuda::Event(false), cuda::Event(false)},
        stored_{cuda::Event(false), cuda::Event(false)} {
    SUROGATE_CHECK(plan.staged && !plan.chunks.empty(), "a staged optimizer has chunks");
    SUROGATE_CHECK(plan.chunks.back().end == parameters.size(), "the plan's chunks cover the optimizer's tensors");
    SUROGATE_CHECK(!plan.masters || host_masters, "offloaded masters have a host buffer");
    const size_t slot_bytes = plan.slot_master_bytes + plan.slot_state_bytes;
    for (auto& slot : slots_) slot = cuda::DeviceBuffer<std::byte>(slot_bytes);
    arenas_.reserve(plan.chunks.size());
    for (size_t k = 0; k < plan.chunks.size(); ++k) {
      const HostOffloadPlan::Chunk& chunk = plan.chunks[k];
      std::byte* slot = slots_[k % 2].data();
      std::vector<DeviceParameter> members(parameters.begin() + static_cast<std::ptrdiff_t>(chunk.first),
                                           parameters.begin() + static_cast<std::ptrdiff_t>(chunk.end));
      if (plan.masters) {
        // The chunk's masters sit in the slot as they sit in the host buffer, from its first one.
        auto* slot_masters = reinterpret_cast<float*>(slot);
        const float* first = host_masters + chunk.master_offset;
        for (DeviceParameter& p : members) p.master = slot_masters + (p.master - first);
      }
      arenas_.emplace_back(slot + plan.slot_master_bytes, plan.slot_state_bytes);
      StateMemory memory;
      if (plan.optimizer) memory = {StateMemory::Place::HostStaged, plan.write_combined, &arenas_.back()};
      chunks_.push_back(make_device_optimizer(optimizer, seed, std::move(members), memory));
    }
  }

  std::string_view name() const override { return chunks_.front()->name(); }

  std::vector<StateTensor> state_tensors() override {
    std::vector<StateTensor> tensors;
    for (auto& chunk : chunks_) {
      for (StateTensor& tensor : chunk->state_tensors()) tensors.push_back(std::move(tensor));
    }
    return tensors;
  }
  // Offloaded state is its host arrays (nothing to copy); state kept on the GPU (offload_master
  // alone) is copied by each chunk's optimizer.
  void upload(cudaStream_t stream) override {
    for (auto& chunk : chunks_) chunk->upload(stream);
  }
  void download(cudaStream_t stream) override {
    for (auto& chunk : chunks_) chunk->download(stream);
  }

  void step(const OptimizerStep& step, const float* clip, cudaStream_t stream) override {
    start_.record(stream);  // what the step reads (gradients, clip factor, masters) is written
    for (size_t k = 0; k < chunks_.size(); ++k) {
      const size_t s = k % 2;
      copy_in_.wait(k < 2 ? start_ : stored_[s]);
      for_each_copy(k, s, [&](void* host, void* device, size_t bytes) {
        CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, copy_in_));
      });
      loaded_[s].record(copy_in_);
      CUDA_CHECK(cudaStreamWaitEvent(stream, loaded_[s], 0));
      chunks_[k]->step(step, clip, stream);
      stepped_[s].record(stream);
      copy_out_.wait(stepped_[s]);
      for_each_copy(k, s, [&](void* host, void* device, size_t bytes) {
        CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, copy_out_));
      });
      stored_[s].record(copy_out_);
    }
    for (size_t s = 0; s < std::min<size_t>(2, chunks_.size()); ++s) CUDA_CHECK(cudaStreamWaitEvent(stream, stored_[s], 0));
  }

private:
  // The (host, slot, bytes) copies of chunk k in slot s: its masters, then its state arrays.
  template <typename Copy>
  void for_each_copy(size_t k, size_t s, Copy&& copy) {
    const HostOffloadPlan::Chunk& chunk = plan_.chunks[k];
    if (plan_.masters) {
      copy(host_masters_ + chunk.master_offset, slots_[s].data(), static_cast<size_t>(chunk.master_count) * sizeof(float));
    }
    for (const StagingArena::Region& region : arenas_[k].regions()) copy(region.host, region.device, region.bytes);
  }

  HostOffloadPlan plan_;
  float* host_masters_;
  std::array<cuda::DeviceBuffer<std::byte>, 2> slots_;
  std::vector<StagingArena> arenas_;  // chunk k's state room in slot k mod 2
  std::vector<std::unique_ptr<DeviceOptimizer>> chunks_;
  cuda::Stream copy_in_, copy_out_;
  cuda::Event start_;  // the rank's stream at the step's start
  std::array<cuda::Event, 2> loaded_, stepped_, stored_;
};

}  // namespace

std::unique_ptr<DeviceOptimizer> make_staged_optimizer(const config::Optimizer& optimizer, uint64_t rounding_seed,
                                                       std::vector<DeviceParameter> parameters,
                                                       const HostOffloadPlan& plan, float* host_masters) {
  return std::make_unique<StagedOptimizer>(optimizer, rounding_seed, std::move(parameters), plan, host_masters);
}

}  // namespace surogate::train
