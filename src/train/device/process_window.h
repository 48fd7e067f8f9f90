// What the parallel device (parallel/parallel_device.cpp, every backend and strategy) knows about
// a step's window of micro-batches and ranks spread over
// processes (distributed/process_world.h): which micro-batches this process's ranks train — micro-
// batch i belongs to replica i mod data (parallel_layout.h), and every rank of that replica (each
// rank of its sequence group, each pipeline stage) takes part in it — the window's totals, and sums
// over every rank of the world. Each sum is taken in one fixed order — window order for the counts, rank order for the
// ranks' values — from every process's part gathered over the control channel, so every process
// gets the same bits, and they are the bits one process driving every rank computes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "distributed/parallel_layout.h"
#include "distributed/process_world.h"
#include "train/device/training_device.h"

namespace surogate::train {

// One rank's part of a step's metrics (what each multi-rank device's measure() collects).
struct RankMeasure {
  double loss = 0.0;     // Σ of its micro-batches' losses (0 where another rank reports them)
  double squares = 0.0;  // its share of the squared gradient norm: its shard's sums' squares
  double router_aux_loss = 0.0;
};

class ProcessWindow {
public:
  // `world` null: one process (every rank is local).
  ProcessWindow(const distributed::ParallelLayout& layout, distributed::ProcessWorld* world);

  // Whether one of this process's ranks trains micro-batch `index` of the window.
  bool takes(int64_t index) const;
  // The local ranks (0 … local ranks − 1, ascending) that train the next micro-batch accumulate()
  // is given, which is the next one this process takes; restart() begins the next window.
  std::vector<int> next_local_ranks();
  void restart() { next_index_ = 0; }

  MicroBatchTotals totals(std::span<const MicroBatchTotals> taken);
  // Σ over every rank of the world, in rank order, of one value per local rank (in local order).
  double sum_over_ranks(std::span<const double> local);
  // The one multi-rank measure: the step's metrics from every local rank's part (in local order).
  // The losses, the router aux losses (when `router_aux`) and the squares are each summed over the
  // world in rank order; the norm is the square root of the squares' sum. Then restart().
  StepMetrics measure(std::span<const RankMeasure> local, bool router_aux);

private:
  bool process_takes(int process, int64_t index) const;

  distributed::ParallelLayout layout_;
  distributed::ProcessWorld* world_;
  int64_t next_index_ = 0;
};

}  // namespace surogate::train
