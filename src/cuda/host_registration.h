// HostRegistration: page-locks host memory that already exists (cudaHostRegister) for as long as
// it lives, so device-to-host copies into it run at the link's full speed and without a staging
// copy through the driver — what makes a checkpoint's download of the masters and optimizer
// state cost little more than the transfer itself. Registration is an optimisation: when the
// driver refuses it (locked-memory limits), the memory stays pageable and copies still work.
// Move-only; the destructor never throws.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace surogate::cuda {

class HostRegistration {
public:
  HostRegistration() = default;
  HostRegistration(void* data, size_t bytes) {
    if (data == nullptr || bytes == 0) return;
    if (cudaHostRegister(data, bytes, cudaHostRegisterDefault) == cudaSuccess) {
      data_ = data;
    } else {
      (void)cudaGetLastError();  // refused: leave the memory pageable, clear the sticky error
    }
  }
  ~HostRegistration() {
    if (data_) cudaHostUnregister(data_);
  }
  HostRegistration(HostRegistration&& other) noexcept : data_(std::exchange(other.data_, nullptr)) {}
  HostRegistration& operator=(HostRegistration&& other) noexcept {
    if (this != &other) {
      if (data_) cudaHostUnregister(data_);
      data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
  }
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;

  bool registered() const { return data_ != nullptr; }

private:
  void* data_ = nullptr;
};

}  // namespace surogate::cuda
