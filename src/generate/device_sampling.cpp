// DeviceSampling (device_sampling.h): the rows' options and a dense [rows, width] context (-1
// padding; width 0 when no row penalises) go up on the backend's stream, the kernel runs there on
// the logits in place, the ids come back.
#include "generate/device_sampling.h"

#if SUROGATE_WITH_CUDA

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "core/error.h"
#include "cuda/kernels/sample_tokens.h"

namespace surogate::generate {
namespace {

template <typename T>
void grow(cuda::DeviceBuffer<T>& buffer, size_t count) {
  if (buffer.size() < count) buffer = cuda::DeviceBuffer<T>(count);
}

template <typename T>
void upload_async(T* device, const std::vector<T>& host, cudaStream_t stream) {
  if (!host.empty()) CUDA_CHECK(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
}

}  // namespace

std::vector<int32_t> DeviceSampling::choose(runtime::CudaBackend& backend, graph::TensorId logits, DType dtype,
                                            int64_t vocab, std::span<const RowSampling> rows,
                                            std::span<const std::span<const int32_t>> contexts) {
  SUROGATE_CHECK(contexts.size() == rows.size(), "device sampling: {} contexts for {} rows", contexts.size(), rows.size());
  const size_t count = rows.size();
  size_t width = 0;
  for (size_t r = 0; r < count; ++r) {
    if (rows[r].repetition_penalty != 1.0f && rows[r].temperature >= 0.0f) width = std::max(width, contexts[r].size());
  }
  std::vector<int32_t> context(count * width, -1);
  for (size_t r = 0; r < count && width > 0; ++r) {
    if (rows[r].repetition_penalty != 1.0f) std::copy(contexts[r].begin(), contexts[r].end(), context.begin() + r * width);
  }
  grow(params_, count);
  grow(context_, context.size());
  grow(tokens_, count);
  const cudaStream_t stream = backend.stream();
  const std::vector<RowSampling> params(rows.begin(), rows.end());  // alive until the stream is synchronised
  upload_async(params_.data(), params, stream);
  upload_async(context_.data(), context, stream);
  const void* device = backend.device_address(logits);
  const auto rows_count = static_cast<int64_t>(count), context_width = static_cast<int64_t>(width);
  switch (dtype) {
    case DType::F32:
      cuda::sample_tokens(tokens_.data(), static_cast<const float*>(device), rows_count, vocab, params_.data(),
                          context_.data(), context_width, stream);
      break;
    case DType::BF16:
      cuda::sample_tokens(tokens_.data(), static_cast<const __nv_bfloat16*>(device), rows_count, vocab, params_.data(),
                          context_.data(), context_width, stream);
      break;
    case DType::F16:
      cuda::sample_tokens(tokens_.data(), static_cast<const __half*>(device), rows_count, vocab, params_.data(),
                          context_.data(), context_width, stream);
      break;
    default:
      SUROGATE_CHECK(false, "device sampling: logits of {}", dtype_torch_name(dtype));
  }
  std::vector<int32_t> tokens(count);
  CUDA_CHECK(cudaMemcpyAsync(tokens.data(), tokens_.data(), count * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return tokens;
}

}  // namespace surogate::generate

#endif
