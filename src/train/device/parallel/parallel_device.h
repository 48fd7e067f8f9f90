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

// Which device a backend trains `layout` with, the same choice for every backend: the parallel
// device over the backend's pipeline ranks (a pipeline layout) or its data-parallel ranks (several
// ranks, a data-parallel device asked for, or offload_quants, whose streaming of the quantized base
// is the ZeRO-3 device's, on one rank too); null where the backend's single device serves.
std::unique_ptr<TrainingDevice> make_parallel_device_if_needed(const TrainingDeviceSetup& setup,
                                                               const distributed::ParallelLayout& layout,
                                                               MakeRanks* pipeline_ranks, MakeRanks* data_ranks);

}  // namespace surogate::train
