// Data, sequence and pipeline parallelism with ZeRO-1/2/3, written once for every backend; see
// parallel_device.cpp.
#pragma once

#include <memory>

#include "distributed/parallel_layout.h"
#include "distributed/rank_threads.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/parallel/rank_host.h"
#include "train/device/training_device.h"

namespace surogate::train {

// Which device a backend trains `layout` with, the same choice for every backend: the parallel
// device over the pipeline strategy's ranks (a pipeline layout) or the data-parallel strategy's
// (several ranks, a data-parallel device asked for, or offload_quants, whose streaming of the
// quantized base is the ZeRO-3 device's, on one rank too), each over the backend's host side
// (`make_host`: rank_host.h, make_cpu_rank_host or make_cuda_rank_host) on the device's rank
// threads; null where the backend's single device serves.
std::unique_ptr<TrainingDevice> make_parallel_device_if_needed(const TrainingDeviceSetup& setup,
                                                               const distributed::ParallelLayout& layout,
                                                               MakeRankHost* make_host);

}  // namespace surogate::train
