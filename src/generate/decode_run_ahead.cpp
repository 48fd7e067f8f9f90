// The device side of a decode step run ahead; see decode_run_ahead.h.
#include "generate/decode_run_ahead.h"

#if SUROGATE_WITH_CUDA

#include <cuda_runtime_api.h>

#include "core/error.h"
#include "cuda/cuda_check.h"

namespace surogate::generate {

DecodeRunAhead::DecodeRunAhead(runtime::CudaBackend& backend, graph::TensorId tokens, graph::TensorId input_ids,
                               int64_t rows)
    : backend_(backend), tokens_(tokens), input_ids_(input_ids), rows_(rows),
      ids_{cuda::PinnedHostBuffer<int32_t>(static_cast<size_t>(rows)),
           cuda::PinnedHostBuffer<int32_t>(static_cast<size_t>(rows))} {
  SUROGATE_CHECK(rows > 0, "DecodeRunAhead: {} rows", rows);
}

void DecodeRunAhead::read_ids(int which) {
  cuda::PinnedHostBuffer<int32_t>& ids = ids_[which];
  CUDA_CHECK(cudaMemcpyAsync(ids.data(), backend_.device_address(tokens_), ids.bytes(), cudaMemcpyDeviceToHost,
                             backend_.stream()));
  copied_[which].record(backend_.stream());
}

std::span<const int32_t> DecodeRunAhead::wait(int which) {
  copied_[which].synchronize();
  return {ids_[which].data(), ids_[which].size()};
}

void DecodeRunAhead::feed_ids_forward() {
  CUDA_CHECK(cudaMemcpyAsync(backend_.device_address(input_ids_), backend_.device_address(tokens_),
                             static_cast<size_t>(rows_) * sizeof(int32_t), cudaMemcpyDeviceToDevice, backend_.stream()));
}

void DecodeRunAhead::settle() { CUDA_CHECK(cudaStreamSynchronize(backend_.stream())); }

}  // namespace surogate::generate

#endif
