// The window of micro-batches across processes; see process_window.h.
#include "train/device/process_window.h"

#include <cmath>

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

std::vector<float> TrainingDevice::read_output(graph::TensorId) {
  SUROGATE_CHECK(false, "read_output on a device of several ranks (kept_outputs() serves them)");
  return {};
}

void TrainingDevice::on_weight_ranks(const std::function<void(int, const runtime::Backend&)>& work) {
  const runtime::Backend* backend = weights_backend();
  SUROGATE_CHECK(backend != nullptr, "a device whose weights one backend holds");
  work(0, *backend);
}

void TrainingDevice::keep_micro_batch_outputs() {
  if (kept_tensors_.empty()) return;
  KeptOutputs outputs;
  for (graph::TensorId tensor : kept_tensors_) outputs.push_back(read_output(tensor));
  kept_.push_back(std::move(outputs));
}

ProcessWindow::ProcessWindow(const distributed::ParallelLayout& layout, distributed::ProcessWorld* world)
    : layout_(layout), world_(world) {
  SUROGATE_CHECK(!layout.spans_processes() || (world != nullptr && world->size() == layout.processes),
                 "a layout over processes comes with their world");
}

bool ProcessWindow::process_takes(int process, int64_t index) const {
  const int replica = distributed::owner_of_micro_batch(index, layout_.data_size);
  for (int rank = process * layout_.local_ranks; rank < (process + 1) * layout_.local_ranks; ++rank) {
    if (layout_.place(rank).replica == replica) return true;
  }
  return false;
}

bool ProcessWindow::takes(int64_t index) const {
  return process_takes(layout_.first_rank / layout_.local_ranks, index);
}

std::vector<int> ProcessWindow::next_local_ranks() {
  while (!takes(next_index_)) ++next_index_;
  const int replica = distributed::owner_of_micro_batch(next_index_++, layout_.data_size);
  std::vector<int> ranks;
  for (int local = 0; local < layout_.local_ranks; ++local) {
    if (layout_.place(layout_.first_rank + local).replica == replica) ranks.push_back(local);
  }
  return ranks;
}

MicroBatchTotals ProcessWindow::totals(std::span<const MicroBatchTotals> taken) {
  if (!layout_.spans_processes()) return sum_in_order(taken);
  // Every process sends one entry per micro-batch of the window (zeros for those it does not take:
  // the processes may take different numbers), and each micro-batch's counts are read from the
  // first process that takes it. Counts travel as doubles: exact below 2^53.
  // This process takes every micro-batch of the replicas it holds: gradient_accumulation_steps each.
  int held = 0;
  for (int replica = 0; replica < layout_.data_size; ++replica) held += takes(replica) ? 1 : 0;
  const int64_t window = static_cast<int64_t>(taken.size()) / held * layout_.data_size;
  std::vector<double> mine(static_cast<size_t>(window) * 3, 0.0);
  size_t next = 0;
  for (int64_t index = 0; index < window; ++index) {
    if (!takes(index)) continue;
    SUROGATE_CHECK(next < taken.size(), "one count per micro-batch this process takes");
    const MicroBatchTotals& batch = taken[next++];
    mine[static_cast<size_t>(index) * 3] = batch.loss_weight;
    mine[static_cast<size_t>(index) * 3 + 1] = static_cast<double>(batch.loss_tokens);
    mine[static_cast<size_t>(index) * 3 + 2] = static_cast<double>(batch.tokens);
  }
  const std::vector<double> every = world_->all_gather(mine);
  std::vector<MicroBatchTotals> in_order;
  for (int64_t index = 0; index < window; ++index) {
    int process = 0;
    while (!process_takes(process, index)) ++process;
    const double* batch = every.data() + (static_cast<size_t>(process) * static_cast<size_t>(window) + static_cast<size_t>(index)) * 3;
    in_order.push_back({batch[0], static_cast<int64_t>(batch[1]), static_cast<int64_t>(batch[2])});
  }
  return sum_in_order(in_order);
}

double ProcessWindow::sum_over_ranks(std::span<const double> local) {
  SUROGATE_CHECK(local.size() == static_cast<size_t>(layout_.local_ranks), "one value per local rank");
  const std::vector<double> every = layout_.spans_processes() ? world_->all_gather(local)
                                                               : std::vector<double>(local.begin(), local.end());
  double sum = 0.0;
  for (double value : every) sum += value;
  return sum;
}

StepMetrics ProcessWindow::measure(std::span<const RankMeasure> local, bool router_aux) {
  restart();
  std::vector<double> losses, squares, aux_losses;
  for (const RankMeasure& rank : local) {
    losses.push_back(rank.loss);
    squares.push_back(rank.squares);
    aux_losses.push_back(rank.router_aux_loss);
  }
  StepMetrics metrics;
  metrics.loss = sum_over_ranks(losses);
  if (router_aux) metrics.router_aux_loss = sum_over_ranks(aux_losses);
  // A float's square is exact in double and sqrt rounds correctly, so with one rank (or one shard
  // holding every gradient) this is the rank's norm to the bit.
  metrics.grad_norm = std::sqrt(sum_over_ranks(squares));
  return metrics;
}

}  // namespace surogate::train
