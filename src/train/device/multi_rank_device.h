// What every multi-rank device shares, whatever its backend and strategy (the CPU and CUDA
// data-parallel and pipeline devices): the layout of its ranks (distributed/parallel_layout.h), the
// threads that drive this process's ranks (distributed/rank_threads.h) and the window of
// micro-batches over processes (process_window.h), with what the TrainingDevice interface asks of
// them; and the ranks' optimizer state in rank order (the checkpoints' single-rank list).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "distributed/parallel_layout.h"
#include "distributed/process_world.h"
#include "distributed/rank_threads.h"
#include "train/device/process_window.h"
#include "train/device/training_device.h"

namespace surogate::train {

class MultiRankDevice : public TrainingDevice {
public:
  int data_parallel_ranks() const override { return layout_.data_size; }
  bool takes_micro_batch(int64_t index) const override { return window_.takes(index); }
  MicroBatchTotals window_totals(std::span<const MicroBatchTotals> taken) override { return window_.totals(taken); }

protected:
  // `world` null: one process.
  MultiRankDevice(const distributed::ParallelLayout& layout, distributed::ProcessWorld* world)
      : layout_(layout), threads_(layout.local_ranks), window_(layout, world) {}

  distributed::ParallelLayout layout_;
  distributed::RankThreads threads_;
  ProcessWindow window_;
};

// The state tensors of every rank's optimizer, in rank order; `optimizer_of(rank)` is the rank's
// optimizer (CPU or CUDA), null where it steps no tensor.
template <typename Ranks, typename OptimizerOf>
std::vector<StateTensor> ranks_optimizer_state(Ranks& ranks, OptimizerOf optimizer_of) {
  std::vector<StateTensor> tensors;
  for (auto& rank : ranks) {
    auto* optimizer = optimizer_of(rank);
    if (optimizer == nullptr) continue;
    for (StateTensor& tensor : optimizer->state_tensors()) tensors.push_back(std::move(tensor));
  }
  return tensors;
}

}  // namespace surogate::train
