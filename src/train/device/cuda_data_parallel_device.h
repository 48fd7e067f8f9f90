// Data parallelism on GPUs (gpus: N on the CUDA backend): see cuda_data_parallel_device.cpp.
#pragma once

#include <memory>

#include "distributed/parallel_layout.h"
#include "train/device/training_device.h"

namespace surogate::train {

// N ranks (threads of this process), rank r on GPU r with its own CudaRankState, NCCL between
// them. Only in CUDA builds.
std::unique_ptr<TrainingDevice> make_cuda_data_parallel_training_device(const TrainingDeviceSetup& setup,
                                                                        const distributed::ParallelLayout& layout);

}  // namespace surogate::train
