// Inverted dropout with a counter-based mask. Element i of a tensor is kept when its 16-bit
// uniform draw is at least the threshold t = round(p · 65536):
//   bits = mix(mix(mix(seed) ^ stream) ^ (i / 4)),  draw(i) = (bits >> 16·(i mod 4)) & 0xffff,
//   out[i] = draw(i) >= t ? x[i] / (1 − t/65536) : 0,
// where mix() is SplitMix64's finaliser. One 64-bit hash serves four neighbouring elements (so a
// GPU kernel that draws the mask stays bound by memory, not by 64-bit multiplies), and the rate
// actually applied is t/65536, p rounded to a multiple of 2^-16 (0.05 → 0.0500031), with the
// kept elements scaled by the exact inverse of that rate, so the expectation is x.
// The mask is a pure function of (seed, stream, i), so nothing is saved for backward (the
// gradient is the same dropout applied to d_out), recompute reproduces it exactly, and a training
// run that feeds the same seed per micro-batch after a resume drops the same elements. `stream`
// separates the dropout sites of one graph (LoRA uses one per distinct adapter input). The graph
// ops read a bound seed of kDropoutOffSeed (core/dropout_rate.h) as p = 0: evaluation through a
// training plan.
#pragma once

#include <cstdint>

#include "core/dropout_rate.h"

namespace surogate::ops {

// The threshold and keep scale (core/dropout_rate.h), under their ops:: names.
using surogate::dropout_keep_scale;
using surogate::dropout_threshold16;

// The keep test for element `index`; exposed for tests and the CUDA kernels' checks.
bool dropout_keeps(uint64_t seed, uint64_t stream, uint64_t index, double probability);

// out = dropout(x) (+ addend when given: the gradient form that folds a pending sum); p in
// [0, 1). p == 0 copies x. Used for d_x = dropout(d_out) too.
template <typename T>
void dropout_forward(const T* x, int64_t count, double probability, uint64_t seed, uint64_t stream, T* out,
                     const T* addend = nullptr);

}  // namespace surogate::ops
