// Host fp32 weights into a CUDA plan's 16-bit weights; see weight_upload.h.
#include "train/device/cuda_rank/weight_upload.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "core/bfloat16.h"
#include "core/error.h"
#include "cuda/cuda_check.h"
#include "ops/parallel_for.h"

namespace surogate::train {
namespace {

// Two halves of pinned host memory: a half is refilled only after the copy that last read it has
// run (one event per half).
class UploadStaging {
public:
  explicit UploadStaging(size_t elements_per_half) : elements_(elements_per_half) {
    void* pinned = nullptr;
    CUDA_CHECK(cudaMallocHost(&pinned, 2 * elements_ * sizeof(uint16_t)));
    memory_ = static_cast<uint16_t*>(pinned);
    for (cudaEvent_t& event : done_) CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  UploadStaging(const UploadStaging&) = delete;
  UploadStaging& operator=(const UploadStaging&) = delete;
  ~UploadStaging() {
    for (int half = 0; half < 2; ++half) {
      if (pending_[half]) cudaEventSynchronize(done_[half]);
      cudaEventDestroy(done_[half]);
    }
    cudaFreeHost(memory_);
  }
  // The half's memory, once the copy that last read it has run.
  uint16_t* wait_for(int half) {
    if (pending_[half]) CUDA_CHECK(cudaEventSynchronize(done_[half]));
    pending_[half] = false;
    return memory_ + static_cast<size_t>(half) * elements_;
  }
  // A copy reading the half was queued on `stream`.
  void issued(int half, cudaStream_t stream) {
    CUDA_CHECK(cudaEventRecord(done_[half], stream));
    pending_[half] = true;
  }

private:
  size_t elements_;
  uint16_t* memory_ = nullptr;
  cudaEvent_t done_[2] = {};
  bool pending_[2] = {false, false};
};

}  // namespace

void upload_16bit_weights(runtime::CudaBackend& backend, std::span<const graph::TensorId> ids,
                          std::span<const WeightView> weights, bool fp16) {
  cudaStream_t stream = backend.stream();
  constexpr size_t kStagingElements = size_t{32} << 20;  // 64 MiB of bf16 per half
  UploadStaging staging(kStagingElements);
  int half = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    std::span<const float> values = weights[i].values;
    auto* device = static_cast<uint16_t*>(backend.device_address(ids[i]));
    for (size_t first = 0; first < values.size(); first += kStagingElements) {
      const size_t count = std::min(kStagingElements, values.size() - first);
      uint16_t* bits = staging.wait_for(half);
      constexpr int64_t kBlock = int64_t{1} << 20;
      const auto blocks = static_cast<int64_t>((count + kBlock - 1) / kBlock);
      ops::parallel_for(blocks, [&](int64_t block) {
        const size_t begin = static_cast<size_t>(block * kBlock);
        const size_t end = std::min(count, begin + static_cast<size_t>(kBlock));
        if (fp16) {
          for (size_t k = begin; k < end; ++k) bits[k] = float_to_f16(values[first + k]);
        } else {
          for (size_t k = begin; k < end; ++k) bits[k] = float_to_bf16(values[first + k]);
        }
      });
      CUDA_CHECK(cudaMemcpyAsync(device + first, bits, count * sizeof(uint16_t), cudaMemcpyHostToDevice, stream));
      staging.issued(half, stream);
      half ^= 1;
    }
  }
}

}  // namespace surogate::train
