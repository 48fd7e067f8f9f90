// The window of micro-batches across processes; see process_window.h.
#include "train/device/process_window.h"

#include "core/error.h"

namespace surogate::train {

namespace {

// Σ of the counts, in the given order.
MicroBatchTotals sum_in_order(std::span<const MicroBatchTotals> batches) {
  MicroBatchTotals sum;
  for (const MicroBatchTotals& batch : batches) {
    sum.loss_weight += batch.loss_weight;
    sum.loss_tokens += batch.loss_tokens;
    sum.tokens += batch.tokens;
  }
  return sum;
}

}  // namespace

MicroBatchTotals TrainingDevice::window_totals(std::span<const MicroBatchTotals> taken) { return sum_in_order(taken); }

ProcessWindow::ProcessWindow(const distributed::ParallelLayout& layout, distributed::ProcessWorld* world)
    : layout_(layout), world_(world) {
  SUROGATE_CHECK(!layout.spans_processes() || (world != nullptr && world->size() == layout.processes),
                 "a layout over processes comes with their world");
}

bool ProcessWindow::takes(int64_t index) const {
  return layout_.holds_rank(distributed::owner_of_micro_batch(index, layout_.world_size));
}

int ProcessWindow::next_local_rank() {
  while (!takes(next_index_)) ++next_index_;
  return distributed::owner_of_micro_batch(next_index_++, layout_.world_size) - layout_.first_rank;
}

MicroBatchTotals ProcessWindow::totals(std::span<const MicroBatchTotals> taken) {
  if (!layout_.spans_processes()) return sum_in_order(taken);
  // Every process takes the same number of micro-batches (gradient_accumulation_steps per rank).
  // Counts travel as doubles: exact below 2^53.
  std::vector<double> mine;
  for (const MicroBatchTotals& batch : taken) {
    mine.insert(mine.end(), {batch.loss_weight, static_cast<double>(batch.loss_tokens), static_cast<double>(batch.tokens)});
  }
  const std::vector<double> every = world_->all_gather(mine);
  const size_t per_process = taken.size();
  // The window in its own order: micro-batch i is the next one of the process holding rank i mod N.
  std::vector<size_t> next(static_cast<size_t>(layout_.processes), 0);
  std::vector<MicroBatchTotals> window;
  for (int64_t index = 0; index < static_cast<int64_t>(per_process) * layout_.processes; ++index) {
    const int process = distributed::owner_of_micro_batch(index, layout_.world_size) / layout_.local_ranks;
    const double* batch = every.data() + (static_cast<size_t>(process) * per_process + next[static_cast<size_t>(process)]++) * 3;
    window.push_back({batch[0], static_cast<int64_t>(batch[1]), static_cast<int64_t>(batch[2])});
  }
  return sum_in_order(window);
}

double ProcessWindow::sum_over_ranks(std::span<const double> local) {
  SUROGATE_CHECK(local.size() == static_cast<size_t>(layout_.local_ranks), "one value per local rank");
  const std::vector<double> every = layout_.spans_processes() ? world_->all_gather(local)
                                                               : std::vector<double>(local.begin(), local.end());
  double sum = 0.0;
  for (double value : every) sum += value;
  return sum;
}

}  // namespace surogate::train
