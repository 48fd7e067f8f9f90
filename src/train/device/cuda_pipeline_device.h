// Pipeline parallelism on GPUs (pipeline_parallel_size > 1 on the CUDA backend): see
// cuda_pipeline_device.cpp.
#pragma once

#include <memory>

#include "distributed/parallel_layout.h"
#include "train/device/training_device.h"

namespace surogate::train {

// stages × replicas ranks (threads of this process, one GPU each), each running one stage of
// setup.pipeline on its GPU; NCCL between them.
std::unique_ptr<TrainingDevice> make_cuda_pipeline_training_device(const TrainingDeviceSetup& setup,
                                                                   const distributed::ParallelLayout& layout);

}  // namespace surogate::train
