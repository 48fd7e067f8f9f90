// Newton–Schulz orthogonalisation on the device, fp32 through cuBLAS (the device twin of
// train/optim/newton_schulz.h, same coefficients and steps): X ← X / ‖X‖_F, then five times
//   G = X Xᵀ,  P = b G + c G²,  X = a X + P X          (a, b, c = 3.4445, −4.7750, 2.0315)
// on the wide orientation, so the Gram matrix is min(rows, cols)². The matrix stays in its
// row-major [rows, cols] memory: read column-major it is Xᵀ (wide) or X (tall), and the
// products are arranged for that, so no transpose is ever written.
// A call orthogonalises a stack of same-shape matrices at once (strided-batched products). The
// workspace is sized once for the largest stack the caller will pass.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/device_buffer.h"

namespace surogate::cuda {

class NewtonSchulz {
public:
  // max_values: the largest matrices·rows·cols of a call; max_gram_values: the largest
  // matrices·min(rows, cols)²; max_matrices: the most matrices in one call.
  NewtonSchulz(int64_t max_values, int64_t max_gram_values, int64_t max_matrices);
  ~NewtonSchulz();
  NewtonSchulz(const NewtonSchulz&) = delete;
  NewtonSchulz& operator=(const NewtonSchulz&) = delete;

  // In place on x [matrices, rows, cols] (row-major, stacked), on `stream`.
  void orthogonalize(float* x, int64_t matrices, int64_t rows, int64_t cols, cudaStream_t stream, int steps = 5);

private:
  cublasHandle_t handle_ = nullptr;
  int64_t max_values_, max_gram_values_, max_matrices_;
  DeviceBuffer<float> next_, gram_, poly_;
  DeviceBuffer<double> norm_;
};

}  // namespace surogate::cuda
