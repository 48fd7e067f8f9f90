// Data parallelism with ZeRO-1/2/3 and sequence groups, written once for every backend; see
// data_parallel_device.cpp.
#pragma once

#include <functional>
#include <memory>

#include "distributed/parallel_layout.h"
#include "distributed/rank_threads.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/training_device.h"

namespace surogate::train {

// `make_ranks` builds the backend's ranks of this process (cpu_data_parallel_ranks.h,
// cuda_data_parallel_ranks.h) on the device's rank threads.
using MakeBackendRanks = std::function<std::unique_ptr<BackendRanks>(distributed::RankThreads& threads)>;

std::unique_ptr<TrainingDevice> make_data_parallel_training_device(const TrainingDeviceSetup& setup,
                                                                   const distributed::ParallelLayout& layout,
                                                                   const MakeBackendRanks& make_ranks);

}  // namespace surogate::train
