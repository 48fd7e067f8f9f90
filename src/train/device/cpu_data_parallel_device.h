// Data parallelism on CPU ranks (gpus: N on the CPU backend): see cpu_data_parallel_device.cpp.
#pragma once

#include <memory>

#include "distributed/parallel_layout.h"
#include "train/device/training_device.h"

namespace surogate::train {

// N ranks (threads of this process), each with its own CpuBackend, gloo between them.
std::unique_ptr<TrainingDevice> make_cpu_data_parallel_training_device(const TrainingDeviceSetup& setup,
                                                                       const distributed::ParallelLayout& layout);

}  // namespace surogate::train
