// Delayed per-tensor scaling of the fp8_hybrid recipe: the state each quantization site keeps,
// and the rules both backends follow (the CPU ops in ops/defs/fp8_linear_def.cpp and the CUDA
// kernels in cuda/kernels/fp8_quantize.cu implement the same ones).
//
// A site (one tensor the graph quantizes: a matmul input, or a gradient in backward) owns a row
// of `2 + history` floats in the graph's one state tensor (models/fp8_recipe.h):
//   row[0]  the delayed amax: the largest amax of the last `history` optimizer steps; 0 until a
//           step has been recorded;
//   row[1]  this step's amax so far (a running max over its micro-batches; a recomputed tensor
//           records the same value again, which changes nothing);
//   row[2 + s % history]  the amax of step s.
// A site quantizes with scale = fp8_scale(row[0]) once the history has a value (every micro-batch
// of a step uses the same scale, so a recomputed tensor is bit-identical); before that ("the first
// steps scaled from the current amax") it scales by the tensor's own amax. Either way it records
// its amax into row[1]. A tensor's quantization therefore depends only on its own values and on
// row[0], never on which micro-batches ran before it: N data-parallel ranks whose rows are made
// equal before each roll (an all-reduce max of row[1]) quantize exactly as one rank running all
// their micro-batches. After each optimizer step, roll_fp8_history moves row[1] into the history
// and row[0] becomes the history's maximum.
// Amaxes compare as the bit patterns of non-negative floats (so a NaN wins and then fp8_scale
// gives 1), which is what the CUDA kernels' integer atomicMax does.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quant/fp8.h"

namespace surogate::quant {

inline constexpr int64_t kFp8StateHeader = 2;

// max of two amaxes (non-negative floats, NaN bigger than everything) as the kernels compare them.
float amax_max(float a, float b);
// max |values| under the same order.
float amax_of(std::span<const float> values);

// Whether a site whose row[0] is `delayed` scales by it (a NaN or 0 does not).
inline bool has_delayed_amax(float delayed) { return delayed > 0.0f; }
// The amax a site scales a tensor whose own amax is `amax` by.
inline float scaling_amax(const float* row, float amax) { return has_delayed_amax(row[0]) ? row[0] : amax; }

// After optimizer step `step`: for each of `sites` rows of `state`, the history slot of `step`
// takes row[1] (times `headroom`), row[1] becomes 0 and row[0] the history's maximum.
void roll_fp8_history(float* state, int64_t sites, int64_t history, int64_t step, float headroom = 1.0f);

// The headroom of a calibration's amaxes (TrainingDevice::calibrate_fp8_scaling): twice the
// calibrating forward's, so that the steps after it, whose amaxes differ by a few percent (their
// tensors are quantized at the calibrated scales, not at their own), keep the calibrated scales
// (one of E4M3's binades given up), as Transformer Engine's `margin` 1 does.
inline constexpr float kFp8CalibrationHeadroom = 2.0f;

// Per site of a [sites, width] state (width = kFp8StateHeader + history; width 1 for a copy of
// the rows' first floats only): whether it scales by its delayed amax (has_delayed_amax(row[0])).
std::vector<bool> delayed_amax_sites(const float* state, int64_t sites, int64_t width);

// After a step that was skipped (not applied): each row[1] back to 0, the history untouched.
void drop_current_amaxes(float* state, int64_t sites, int64_t history);

}  // namespace surogate::quant
