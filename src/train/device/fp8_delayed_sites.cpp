// See fp8_delayed_sites.h.
#include "train/device/fp8_delayed_sites.h"

#include "cuda/cuda_check.h"
#include "quant/fp8_scaling.h"

namespace surogate::train {

Fp8DelayedSites::Fp8DelayedSites(int64_t sites, int64_t history)
    : sites_(sites), width_(quant::kFp8StateHeader + history), first_(static_cast<size_t>(sites)) {}

void Fp8DelayedSites::after_roll(const float* device_state, cudaStream_t stream) {
  if (sites_ == 0) return;
  // Column 0 of the [sites, width] state: one float per row.
  CUDA_CHECK(cudaMemcpy2DAsync(first_.data(), sizeof(float), device_state, static_cast<size_t>(width_) * sizeof(float),
                               sizeof(float), static_cast<size_t>(sites_), cudaMemcpyDeviceToHost, stream));
  copied_.record(stream);
  pending_ = true;
}

void Fp8DelayedSites::apply(runtime::CudaBackend& backend) {
  if (!pending_) return;
  copied_.synchronize();
  pending_ = false;
  backend.set_fp8_delayed_sites(quant::delayed_amax_sites(first_.data(), sites_, 1));
}

void Fp8DelayedSites::restore(const float* host_state, runtime::CudaBackend& backend) {
  pending_ = false;
  backend.set_fp8_delayed_sites(quant::delayed_amax_sites(host_state, sites_, width_));
}

}  // namespace surogate::train
