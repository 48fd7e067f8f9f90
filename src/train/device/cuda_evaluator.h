// The GPU evaluator: the bf16 forward plan (decoder + accuracy, LoRA without dropout) on its own
// CudaBackend whose parameters are the training backend's, read in place (no second copy of the
// weights, nothing to upload before an evaluation). Only the activations, scratch and inputs of
// a forward micro-batch are allocated. run() waits for the training stream first, so the last
// optimizer step's weights are what it reads.
#pragma once

#include <memory>
#include <span>

#include "runtime/cuda_backend.h"
#include "train/evaluator.h"

namespace surogate::train {

// `training` must stay loaded (and alive) while the evaluator exists.
std::unique_ptr<Evaluator> make_cuda_evaluator(const EvaluatorSetup& setup, runtime::CudaBackend& training);

// Under ZeRO-3, where no GPU keeps the whole weights: the forward plan gathers them layer by layer
// (train/device/weight_shards.h: evaluation_gathering) from a pinned bf16 image of `weights` (the
// device's host copies, current after TrainingDevice::before_evaluation), rebuilt at the start of
// each run() and copied in a group at a time on a side stream, one use ahead; the parameters the
// plan keeps whole (a quantized base) are still read in place from `training`. Its GPU memory is
// the forward arena and two layers' buffers; the image is host memory.
std::unique_ptr<Evaluator> make_cuda_gathering_evaluator(const EvaluatorSetup& setup, runtime::CudaBackend& training,
                                                         std::span<const WeightView> weights);

}  // namespace surogate::train
