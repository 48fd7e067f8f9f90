// One GPU rank of the parallel device, for both strategies (rank_backend.h): CudaRank, over the
// rank's CudaRankState (bf16 weights, fp32 masters, the flat gradient accumulators, the clip factor
// and the optimizer for its shard). Its units are the state's trainable entries from `first_entry`
// on (a pipeline's last stage holds its tied tensors first, which the first stage steps), one run of
// the flat masters and accumulators: the accumulators are summed in place in their dtype (fp32, or
// bf16 with gradient_dtype bf16), the norm and clip factor are taken on the device, and ZeRO-1's
// all-gather (shard_publish.h) carries a replica's bf16 weights, rounded from its shard's masters
// into the accumulators' memory (the other units' masters gathered only before a download) on the
// side stream while the next micro-batch computes (cuda_publish_overlap.h), or a pipeline stage's
// masters, the bf16 weights rewritten from them. The
// replica reduction's pieces are set up by the host side (cuda_rank_host.cpp): the side
// stream and its NCCL communicator, the ZeRO-1 buckets (cuda_gradient_reducer.h) or ZeRO-2/3's
// sharded accumulation (cuda_sharded_gradients.h), and ZeRO-3's pieces of the weights and their
// gatherers (cuda_weight_gatherer.h). Everything is enqueued on the rank's streams.
// The state belongs to the rank's plans (cuda_rank_plans.h).
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cuda/device_buffer.h"
#include "train/device/cuda_gradient_reducer.h"
#include "train/device/cuda_publish_overlap.h"
#include "train/device/cuda_rank/step_phases.h"
#include "train/device/cuda_rank_state.h"
#include "train/device/cuda_sharded_gradients.h"
#include "train/device/cuda_weight_gatherer.h"
#include "train/device/parallel/rank_backend.h"

namespace surogate::train {

class CudaRank final : public RankBackend {
public:
  // The units: `layout`'s entries from `first_entry` on (`layout` must outlive the rank).
  CudaRank(const CudaTrainableLayout& layout, size_t first_entry) : layout_(layout), first_entry_(first_entry) {}

  // The rank's state, once made (on the rank's thread); it must outlive the rank.
  void attach(CudaRankState& state) { state_ = &state; }
  CudaRankState& state() { return *state_; }

  DType gradient_dtype() const override { return state_->accumulators().dtype(); }
  CollectiveRegion flat_gradients() override;
  std::vector<CollectiveRegion> tied_gradients() override;
  std::vector<CollectiveRegion> tied_weights() override;
  void finish_reduction() override;
  // The norm of the units (the rank's shard), on the device.
  void count_squares(size_t first, size_t end) override {
    settle_publish();
    state_->gradient_norm(first_entry_ + first, first_entry_ + end);
  }
  double squares(distributed::Communicator& world) override;
  // The clip factor from the world's norm, on the device.
  void set_grad_norm(double norm) override { state_->clip().set_from_norm(norm); }
  void step(const OptimizerStep& step) override;
  // A replica under ZeRO-1 (publish_bf16()): its bf16 weights, rounded from the masters into the
  // accumulators' memory; else the masters the optimizer updated in place, the bf16 weights
  // rewritten from them.
  PublishedWeights published_weights() override;
  ShardCopies shard_copies() override;
  void* take_stale_masters() override;
  // ZeRO-1 replicas: publish bf16 weights through the full-size gradient accumulators, free after
  // the step (set up before any collective: it allocates).
  void publish_bf16();
  // With `publish_overlap` set: the publish on the side stream (cuda_publish_overlap.h).
  distributed::Communicator* publish_group() override {
    return publish_overlap ? side_communicator.get() : nullptr;
  }
  void begin_publish() override {
    if (publish_overlap) publish_overlap->begin();
  }
  void bucket_published(size_t bucket) override {
    if (publish_overlap) publish_overlap->published(bucket);
  }
  runtime::StepObserver* publish_waits() override {
    return publish_overlap && publish_overlap->in_flight() ? publish_overlap.get() : nullptr;
  }
  void settle_publish() override {
    if (publish_overlap) publish_overlap->settle();
  }
  // Deferred zeroing (a ZeRO-1 replica's) only marks the accumulators: the publish may go on.
  void zero_gradients() override {
    if (!state_->accumulators().defers_zeroing()) settle_publish();
    state_->accumulators().zero();
  }
  std::vector<StateTensor> optimizer_state() override {
    return state_->optimizer() ? state_->optimizer()->state_tensors() : std::vector<StateTensor>{};
  }
  void begin_step_phases() override {
    if (step_phases) step_phases->begin_step();
  }
  void end_step_phase(const char* phase) override {
    if (step_phases) step_phases->end_phase(phase);
  }
  size_t gradient_accumulator_bytes() const override {
    return state_->accumulators().bytes() + (sharded ? sharded->staging_bytes() : 0);
  }

  std::vector<size_t> tied;  // the entries a pipeline shares with its other end
  // The replica reduction's pieces (cuda_rank_host.cpp).
  std::optional<cuda::Stream> side;  // the gradient buckets' and ZeRO-3's gathers' stream
  std::unique_ptr<distributed::Communicator> side_communicator;  // on it
  std::unique_ptr<CudaGradientReducer> reducer;   // ZeRO-1
  std::unique_ptr<CudaShardedGradients> sharded;  // ZeRO-2/3
  cuda::DeviceBuffer<__nv_bfloat16> owned;        // ZeRO-3: the rank's pieces of the weights
  CudaWeightShard weight_shard;
  std::unique_ptr<CudaPublishOverlap> publish_overlap;  // ZeRO-1 replicas of a world of several
  std::unique_ptr<CudaWeightGatherer> gatherer;
  std::unique_ptr<CudaWeightGatherer> quantized_gatherer;  // ZeRO-3: the quantized base's gathers
  cuda::DeviceBuffer<float> scratch;  // ZeRO-3: a chunk of a weight on its way to or from the host
  std::optional<CudaStepPhases> step_phases;  // debug_time_breakdown (cuda_rank_host.cpp)

private:
  // The units' start in the flat buffers (elements).
  int64_t units_offset() const {
    return first_entry_ < layout_.entries.size() ? layout_.entries[first_entry_].offset : layout_.total;
  }
  // The tied entries in a flat buffer of the rank's entries (`base`, `element` bytes each).
  std::vector<CollectiveRegion> tied_regions(void* base, size_t element) const;

  const CudaTrainableLayout& layout_;
  size_t first_entry_;
  CudaRankState* state_ = nullptr;
  bool publishes_bf16_ = false;
  bool masters_stale_ = false;  // a bf16 publish left the other ranks' units' masters behind
};

}  // namespace surogate::train
