// PinnedHostBuffer<T>: an array in page-locked host memory (cudaHostAlloc), the home of what the
// offload_* options move off the GPU. Always mapped into the device's address space, so a kernel
// may read and write it through device_data() over the host link (zero-copy); copies to and from
// it run asynchronously at the link's speed. write_combined (use_write_combined) asks for
// write-combining pages: faster for the GPU to read and write over PCIe, very slow for the host
// CPU to read (checkpoints read it once per save).
// Move-only; the destructor never throws.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <utility>

#include "cuda/cuda_check.h"

namespace surogate::cuda {

template <typename T>
class PinnedHostBuffer {
public:
  PinnedHostBuffer() = default;
  explicit PinnedHostBuffer(size_t count, bool write_combined = false) : count_(count) {
    if (count == 0) return;
    unsigned flags = cudaHostAllocMapped | cudaHostAllocPortable;
    if (write_combined) flags |= cudaHostAllocWriteCombined;
    CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&data_), count * sizeof(T), flags));
    CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_data_), data_, 0));
  }
  ~PinnedHostBuffer() {
    if (data_) cudaFreeHost(data_);
  }
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), device_data_(std::exchange(other.device_data_, nullptr)),
        count_(std::exchange(other.count_, 0)) {}
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept {
    if (this != &other) {
      if (data_) cudaFreeHost(data_);
      data_ = std::exchange(other.data_, nullptr);
      device_data_ = std::exchange(other.device_data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  T* data() { return data_; }                    // the host's address
  const T* data() const { return data_; }
  T* device_data() { return device_data_; }      // the same memory as kernels address it
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

private:
  T* data_ = nullptr;
  T* device_data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace surogate::cuda
