// The GPU evaluator: the bf16 forward plan (decoder + accuracy, LoRA without dropout) on its own
// CudaBackend whose parameters are the training backend's, read in place (no second copy of the
// weights, nothing to upload before an evaluation). Only the activations, scratch and inputs of
// a forward micro-batch are allocated. run() waits for the training stream first, so the last
// optimizer step's weights are what it reads.
#pragma once

#include <memory>

#include "runtime/cuda_backend.h"
#include "train/evaluator.h"

namespace surogate::train {

// `training` must stay loaded (and alive) while the evaluator exists.
std::unique_ptr<Evaluator> make_cuda_evaluator(const EvaluatorSetup& setup, runtime::CudaBackend& training);

}  // namespace surogate::train
