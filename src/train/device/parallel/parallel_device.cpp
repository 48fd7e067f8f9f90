// Data, sequence and pipeline parallelism with ZeRO-1/2/3 on any backend: the TrainingDevice the
// trainer drives when `gpus: N` (N > 1) trains, when the ranks are spread over several processes (a
// launcher or Ray: distributed/process_world.h), or when pipeline_parallel_size > 1. This process's
// ranks are threads (distributed/rank_threads.h), each with a RankEngine (rank_engine.h): a
// replica's whole model (replica_rank_engine.h) or one pipeline stage (stage_ranks.h), each
// written once over the backend's rank (rank_backend.h: CpuRank on gloo, CudaRank on NCCL) and its
// plans (cpu_rank_plans.h, cuda_rank_plans.h), built by the strategy's ranks
// (data_parallel_ranks.cpp, pipeline_ranks.cpp) over the backend's host side (rank_host.h: cpu_rank_host.h, cuda_rank_host.h). The step's
// algorithm is here, once (a pipeline stage's reduction and publish: stage_ranks.cpp):
//
//   accumulate() × (gradient_accumulation_steps × local ranks): micro-batch i of the window belongs
//     to replica i mod data (distributed::owner_of_micro_batch); the trainer hands this process only
//     its own ranks' micro-batches (takes_micro_batch), each kept by every rank of its replica (each
//     rank of a sequence group its slice, each stage the inputs its plans read); nothing runs yet.
//   measure(): every rank runs its micro-batches; its replica reduction (gradient_buckets.h under
//     ZeRO-1: the last micro-batch's buckets reduce-scattered as the backward completes them;
//     sharded_gradients.h under ZeRO-2/3: every micro-batch's buckets reduce-scattered into
//     accumulators of the rank's shard) sums them over the world. The trainer scaled every
//     micro-batch's loss by 1 / (loss tokens of the whole window), so the sum is the window's mean
//     gradient. The loss, router aux loss and squares are summed over the world in rank order
//     (ProcessWindow::measure): every rank counts its shard's (the only sums it received). Every
//     rank clips by the total.
//   update(): each rank clips and steps the optimizer for its shard only (distributed::place_shards:
//     a contiguous run of whole tensors; its optimizer holds state for those alone: ZeRO-1), then
//     ZeRO-1/2 publish the shard (every rank gets every rank's updated weights; ZeRO-3's ranks keep
//     only their pieces, gathered where the plan reads them); then the FP8 copies, the zeroed
//     gradients and fp8_hybrid's max-reduced scaling state.
//   kept_outputs() (surogate dpo's per-sequence log-probs, keep_outputs): each rank copies them
//     after each micro-batch it runs; after measure() they come back in the order accumulate() was
//     given the micro-batches (this process's ranks only: the objective refuses several processes).
//
// The host side is the strategy's ranks' (BackendRanks). optimizer_state() is the ranks' shards in rank
// order — the single-rank optimizer's list of tensors, since shards are contiguous runs of whole
// tensors — so checkpoints have the single-rank format and a run resumes on any number of ranks;
// across processes the leader gathers the others' shards to save them and scatters them back after
// a resume (process_optimizer_state.h). ZeRO-3's host copies are brought up to date only when a
// step changed the weights since: every process makes the same calls, so they all agree, and the
// leader's last download for the outputs then finds its copies current and calls no collective
// alone. The whole design, with the reasons: docs/architecture.md, "Data parallelism".
#include "train/device/parallel/parallel_device.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "train/device/process_optimizer_state.h"
#include "train/device/process_window.h"

namespace surogate::train {
namespace {

class ParallelDevice final : public TrainingDevice {
public:
  // `setup.world` null: one process.
  ParallelDevice(const TrainingDeviceSetup& setup, const distributed::ParallelLayout& layout,
                 const std::function<std::unique_ptr<BackendRanks>(const RanksSetup&)>& make_ranks)
      : layout_(layout), threads_(layout.local_ranks), window_(layout, setup.world), optimizer_exchange_(setup.world),
        ranks_(make_ranks({setup, layout_, threads_})) {}

  int data_parallel_ranks() const override { return layout_.data_size; }
  bool takes_micro_batch(int64_t index) const override { return window_.takes(index); }
  MicroBatchTotals window_totals(std::span<const MicroBatchTotals> taken) override { return window_.totals(taken); }

  std::string description() const override { return ranks_->description(); }
  std::span<const WeightView> weights() const override { return ranks_->weights(); }
  std::span<const WeightView> trainable() const override { return ranks_->trainable(); }
  bool host_views_are_live() const override { return ranks_->host_views_are_live(); }
  std::vector<std::pair<std::string, double>> time_breakdown() override { return ranks_->time_breakdown(); }
  std::vector<std::pair<std::string, double>> step_phases() override { return ranks_->step_phases(); }
  // GRPO's rollouts: each replica's own weights, on its rank's thread.
  int weight_ranks() const override { return ranks_->replicas_hold_weights() ? layout_.local_ranks : 0; }
  void on_weight_ranks(const std::function<void(int, const runtime::Backend&)>& work) override {
    SUROGATE_CHECK(weight_ranks() > 0, "ranks that each hold a whole replica's weights");
    threads_.run([&](int r) { work(r, ranks_->replica_weights(r)); });
  }
  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    return ranks_->make_evaluator(setup);
  }
  void store_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) override {
    ranks_->store_quantized(weight, pieces);
  }

  // The ranks' shards (gathered to the leader across processes), then fp8_hybrid's scaling state.
  std::vector<StateTensor> optimizer_state() override {
    std::vector<StateTensor> tensors = optimizer_exchange_.gather(local_optimizer_state());
    if (std::optional<StateTensor> fp8 = ranks_->fp8_state_tensor()) tensors.push_back(std::move(*fp8));
    return tensors;
  }

  // Across processes the leader first hands back the shards a resume restored into its copies.
  void upload() override {
    optimizer_exchange_.scatter(local_optimizer_state());
    ranks_->upload();
    host_current_ = true;  // ZeRO-3: the owners hold what the host copies hold
  }
  void download() override {
    download_weight_shards();
    ranks_->download();
  }
  // ZeRO-3 and pipelines: the evaluator reads the host copies.
  void before_evaluation() override {
    download_weight_shards();
    ranks_->before_evaluation();
  }

  void accumulate(std::span<const runtime::InputBinding> inputs) override {
    const std::vector<int> locals = window_.next_local_ranks();
    for (const int local : locals) {
      const int sequence = layout_.place(layout_.first_rank + local).sequence;
      ranks_->engine(local).take(inputs, sequence, layout_.sequence_size);
    }
    if (keeps_outputs_) given_to_.push_back(locals.front());
  }

  // Each rank keeps the outputs of the micro-batches it runs; kept_outputs() puts them back in the
  // order accumulate() was given them (a replica's first local rank reports its micro-batches).
  void keep_outputs(std::vector<graph::TensorId> tensors) override {
    keeps_outputs_ = !tensors.empty();
    threads_.run([&](int r) { ranks_->engine(r).keep_outputs(tensors); });
  }
  std::vector<KeptOutputs> kept_outputs() override {
    std::vector<std::vector<KeptOutputs>> by_rank(static_cast<size_t>(layout_.local_ranks));
    threads_.run([&](int r) { by_rank[static_cast<size_t>(r)] = ranks_->engine(r).take_outputs(); });
    std::vector<size_t> next(by_rank.size(), 0);
    std::vector<KeptOutputs> kept;
    for (const int local : std::exchange(given_to_, {})) {
      std::vector<KeptOutputs>& rank = by_rank[static_cast<size_t>(local)];
      SUROGATE_CHECK(next[static_cast<size_t>(local)] < rank.size(), "a kept output per micro-batch rank {} ran", local);
      kept.push_back(std::move(rank[next[static_cast<size_t>(local)]++]));
    }
    return kept;
  }

  StepMetrics measure() override {
    // Every rank's micro-batches first (on GPUs only enqueued), then each waits for its part.
    threads_.run([&](int r) { ranks_->engine(r).run_micro_batches(); });
    std::vector<RankMeasure> measures(static_cast<size_t>(layout_.local_ranks));
    threads_.run([&](int r) { measures[static_cast<size_t>(r)] = ranks_->engine(r).measure(); });
    const StepMetrics metrics = window_.measure(measures, ranks_->engine(0).has_router_aux_loss());
    threads_.run([&](int r) { ranks_->engine(r).set_grad_norm(metrics.grad_norm); });
    return metrics;
  }

  void update(const OptimizerStep& step) override {
    threads_.run([&](int r) {
      RankEngine& engine = ranks_->engine(r);
      engine.step_shard(step);
      if (!layout_.shard_weights) engine.publish_shard();
      engine.finish_update(step);
    });
    host_current_ = false;
  }

  void skip_update() override {
    threads_.run([&](int r) {
      ranks_->engine(r).zero_gradients();
      if (!keep_fp8_amaxes_) ranks_->engine(r).drop_fp8_amaxes();
    });
  }

  void keep_fp8_amaxes(bool keep) override { keep_fp8_amaxes_ = keep; }
  void calibrate_fp8_scaling() override {
    threads_.run([&](int r) { ranks_->engine(r).calibrate_fp8_scaling(); });
  }

  size_t gradient_accumulator_bytes() const override {
    size_t largest = 0;
    for (int r = 0; r < layout_.local_ranks; ++r) largest = std::max(largest, ranks_->engine(r).gradient_accumulator_bytes());
    return largest;
  }

private:
  // ZeRO-3: only when a step changed the weights since the host copies were uploaded or downloaded.
  void download_weight_shards() {
    if (!layout_.shard_weights || host_current_) return;
    host_current_ = true;
    ranks_->download_weight_shards();
  }

  // This process's ranks' optimizer state, in rank order.
  std::vector<StateTensor> local_optimizer_state() {
    std::vector<StateTensor> tensors;
    for (int r = 0; r < layout_.local_ranks; ++r) {
      for (StateTensor& tensor : ranks_->engine(r).optimizer_state()) tensors.push_back(std::move(tensor));
    }
    return tensors;
  }

  distributed::ParallelLayout layout_;
  distributed::RankThreads threads_;
  ProcessWindow window_;
  ProcessOptimizerState optimizer_exchange_;
  std::unique_ptr<BackendRanks> ranks_;  // after threads_: released on them
  bool host_current_ = true;  // ZeRO-3: no step since the host copies were uploaded or downloaded
  bool keeps_outputs_ = false;
  bool keep_fp8_amaxes_ = false;  // fp8_hybrid calibration (keep_fp8_amaxes)
  std::vector<int> given_to_;  // keep_outputs(): the local rank that runs each micro-batch given since kept_outputs()
};

}  // namespace

std::unique_ptr<TrainingDevice> make_parallel_device_if_needed(const TrainingDeviceSetup& setup,
                                                               const distributed::ParallelLayout& layout,
                                                               MakeRankHost* make_host) {
  if (layout.pipeline_size > 1) {
    SUROGATE_CHECK(setup.pipeline != nullptr, "a pipeline layout comes with the stages' plans");
    return std::make_unique<ParallelDevice>(
        setup, layout, [&](const RanksSetup& ranks) { return make_pipeline_ranks(ranks, make_host(ranks)); });
  }
  if (layout.several_ranks() || setup.data_parallel_device || setup.config->offload.offload_quants) {
    return std::make_unique<ParallelDevice>(
        setup, layout, [&](const RanksSetup& ranks) { return make_data_parallel_ranks(ranks, make_host(ranks)); });
  }
  return nullptr;
}

}  // namespace surogate::train
