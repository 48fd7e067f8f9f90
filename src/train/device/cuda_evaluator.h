// The GPU evaluator: the bf16 forward plan (decoder + accuracy, LoRA without dropout) on its own
// CudaBackend whose parameters are the training backend's, read in place (no second copy of the
// weights, nothing to upload before an evaluation). Its activation arena and scratch are the
// training backend's too where they fit in them (CudaBackend::share_activation_memory_with; the
// training holds nothing there between its executes), so usually only the inputs of a forward
// micro-batch are allocated. run() waits for the training stream first, so the last optimizer
// step's weights are what it reads, and reads each micro-batch's results back before the next.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "distributed/rank_threads.h"
#include "runtime/cuda_backend.h"
#include "train/evaluator.h"

namespace surogate::train {

// `training` must stay loaded (and alive) while the evaluator exists.
std::unique_ptr<Evaluator> make_cuda_evaluator(const EvaluatorSetup& setup, runtime::CudaBackend& training);

// Under ZeRO-3, where no GPU keeps the whole weights: the forward plan gathers them layer by layer
// (train/device/weight_shards.h: evaluation_gathering) from a pinned bf16 image of `weights` (the
// device's host copies, current after TrainingDevice::before_evaluation), rebuilt at the start of
// each run() and copied in a group at a time on a side stream, one use ahead; the parameters the
// plan keeps whole (a quantized base under persistent_quants) are still read in place from
// `training`. With `quantized` (the training GPUs keep no whole quantized base: shard_weights
// without persistent_quants, or offload_quants) the quantized base is gathered too, layer by layer
// from a pinned image of its pieces built once from `quantized` (each piece's bytes by name), as
// quantized_base_shards.h's Offloaded keeping does. Its GPU memory is the forward arena and two
// layers' buffers; the images are host memory.
using QuantizedPieceSource = std::function<std::span<const std::byte>(const std::string& piece)>;
std::unique_ptr<Evaluator> make_cuda_gathering_evaluator(const EvaluatorSetup& setup, runtime::CudaBackend& training,
                                                         std::span<const WeightView> weights,
                                                         const QuantizedPieceSource& quantized = {});

// The evaluator `inner` of a multi-GPU device, made on rank 0's thread of `threads` (its CUDA device
// current, the thread its backend was made on): run and released on that thread.
std::unique_ptr<Evaluator> on_rank_zero(distributed::RankThreads& threads, std::unique_ptr<Evaluator> inner);

}  // namespace surogate::train
