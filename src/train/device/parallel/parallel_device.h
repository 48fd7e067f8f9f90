// Data, sequence and pipeline parallelism with ZeRO-1/2/3, written once for every backend; see
// parallel_device.cpp.
#pragma once

#include <memory>

#include "distributed/parallel_layout.h"
#include "distributed/rank_threads.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/training_device.h"

namespace surogate::train {

// `make_ranks` makes the backend's ranks of this process (rank_engine.h: make_cpu_data_parallel_ranks,
// make_cuda_pipeline_ranks, ...) on the device's rank threads.
std::unique_ptr<TrainingDevice> make_parallel_training_device(const TrainingDeviceSetup& setup,
                                                              const distributed::ParallelLayout& layout,
                                                              MakeRanks* make_ranks);

}  // namespace surogate::train
