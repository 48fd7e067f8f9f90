// Pipeline parallelism on CPU ranks (pipeline_parallel_size > 1 on the CPU backend): see
// cpu_pipeline_device.cpp.
#pragma once

#include <memory>

#include "distributed/parallel_layout.h"
#include "train/device/training_device.h"

namespace surogate::train {

// stages × replicas ranks (threads of this process), each running one stage of setup.pipeline on
// its own CpuBackends; gloo between them.
std::unique_ptr<TrainingDevice> make_cpu_pipeline_training_device(const TrainingDeviceSetup& setup,
                                                                  const distributed::ParallelLayout& layout);

}  // namespace surogate::train
