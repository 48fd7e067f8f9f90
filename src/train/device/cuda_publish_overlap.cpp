// ZeRO-1's publish overlapped with the next micro-batch; see cuda_publish_overlap.h.
#include "train/device/cuda_publish_overlap.h"

#include "core/error.h"
#include "cuda/cuda_check.h"

namespace surogate::train {

CudaPublishOverlap::CudaPublishOverlap(const compiler::ExecutionPlan& plan, std::span<const GradientBucket> buckets,
                                       std::span<const graph::TensorId> weights, cudaStream_t compute,
                                       cudaStream_t side)
    : compute_(compute), side_(side), waits_(publish_waits(plan, buckets, weights)) {
  SUROGATE_CHECK(!buckets.empty(), "a bucketed publish has buckets");
  for (size_t b = 0; b < buckets.size(); ++b) published_.emplace_back(false);
}

void CudaPublishOverlap::begin() {
  stepped_.record(compute_);
  CUDA_CHECK(cudaStreamWaitEvent(side_, stepped_, 0));
  began_ = in_flight_ = true;
}

void CudaPublishOverlap::published(size_t b) {
  SUROGATE_CHECK(b < published_.size(), "a publish bucket");
  published_[b].record(side_);
}

void CudaPublishOverlap::settle() {
  if (began_) CUDA_CHECK(cudaStreamWaitEvent(compute_, published_.back(), 0));
  in_flight_ = false;
}

void CudaPublishOverlap::before_step(size_t step) {
  if (!in_flight_ || step >= waits_.size()) return;
  for (size_t b : waits_[step]) CUDA_CHECK(cudaStreamWaitEvent(compute_, published_[b], 0));
}

// After the micro-batch's last step every bucket was waited for.
void CudaPublishOverlap::after_step(size_t step) {
  if (step + 1 >= waits_.size()) in_flight_ = false;
}

}  // namespace surogate::train
