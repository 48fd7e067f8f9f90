// Inverted dropout with a counter-based mask: element i of a tensor is kept when
//   uniform(seed, stream, i) >= p,   out[i] = kept ? x[i] / (1 − p) : 0,
// where uniform() hashes (seed, stream, i) with SplitMix64 finalisers into [0, 1). The mask is a
// pure function of those three numbers, so nothing is saved for backward (the gradient is the
// same dropout applied to d_out), recompute reproduces it exactly, and a training run that feeds
// the same seed per micro-batch after a resume drops the same elements. `stream` separates the
// dropout sites of one graph (LoRA uses one per adapted projection).
#pragma once

#include <cstdint>

namespace surogate::ops {

// The keep test for element `index`; exposed for tests.
bool dropout_keeps(uint64_t seed, uint64_t stream, uint64_t index, double probability);

// out = dropout(x); p in [0, 1). p == 0 copies x. Used for d_x = dropout(d_out) too.
template <typename T>
void dropout_forward(const T* x, int64_t count, double probability, uint64_t seed, uint64_t stream, T* out);

}  // namespace surogate::ops
