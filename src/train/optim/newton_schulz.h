// Approximate orthogonalisation of a matrix by a quintic Newton–Schulz iteration: returns a
// matrix with the same singular vectors and singular values pushed towards 1 (roughly into
// [0.7, 1.2]), which is what Muon-style optimizers step along. Runs in fp32 through BLAS.
#pragma once

#include <cstdint>
#include <span>

namespace surogate::train {

constexpr int kNewtonSchulzSteps = 5;

// matrix: rows x cols, row-major; the result overwrites it.
void newton_schulz_orthogonalize(std::span<float> matrix, int64_t rows, int64_t cols,
                                 int steps = kNewtonSchulzSteps);

}  // namespace surogate::train
