// What one rank of a backend is, for both strategies of the parallel device (parallel_device.cpp).
// The strategies are written once — the engines (replica_rank_engine.h: data and sequence
// parallelism with ZeRO-1/2/3; stage_ranks.h: the pipeline) and the pipeline stage's 1F1B
// algorithm (pipeline_stage.h: the schedule's rounds, receive slots, tags, the gradients summed
// over later stages, the last stage's loss) — and drive, per backend, one class of each of:
//   - a RankBackend (cpu_rank.h: CpuRank; cuda_rank.h: CudaRank): the rank's trainable units (the
//     trainable tensors it steps, in one order) as a flat view of their gradients, the squares of a
//     run of units, its shard's optimizer (clip and step), the flat fp32 weights ZeRO-1's publish
//     all-gathers and how units travel to and from them (shard_publish.h), and its replica
//     reduction's pieces (the buckets, ZeRO-2/3's sharded accumulators and ZeRO-3's gatherers, set
//     up by the backend's host side where the strategy asks for them);
//   - the rank's plans (cpu_rank_plans.h: CpuRankPlans; cuda_rank_plans.h: CudaRankPlans): its
//     training plan (a replica's whole model, or a stage's) and a stage's forward plan, offering
//     each strategy its primitives: a ReplicaRunner below (run one micro-batch, its losses,
//     fp8_hybrid's state, kept outputs) and a StageDevice (stage_device.h: run a stage's plans,
//     a boundary tensor's bytes, copy / add / zero them, a send's buffer, a round's group of
//     transfers, the loss, refresh what reads the weights);
//   - a host side (rank_host.h: RankHost: CpuRankHost, CudaRankHost) that makes them.
// No class is per backend × strategy: a new backend is one rank class, one plans class and one
// host class; a new strategy is one engine over these interfaces (and, if its plans run their own
// way, one primitives interface the plans classes implement). Everything runs on the rank's thread
// (distributed/rank_threads.h) but StageRunner::take().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "distributed/communicator.h"
#include "runtime/step_observer.h"
#include "train/device/fp8_state.h"
#include "train/device/micro_batch.h"
#include "train/device/pipeline_parameters.h"
#include "train/device/pipeline_stage_groups.h"
#include "train/device/process_window.h"
#include "train/device/shard_publish.h"
#include "train/device/training_device.h"

namespace surogate::train {

class RankBackend {
public:
  virtual ~RankBackend() = default;

  // The gradients' dtype in the collectives.
  virtual DType gradient_dtype() const = 0;
  // The units' gradients as one flat buffer (a backend whose gradients are not one buffer copies
  // them into it here): what a pipeline stage's gradient group sums.
  virtual CollectiveRegion flat_gradients() = 0;
  // The tensors a pipeline shares with its other end (tied embeddings): their gradients and fp32
  // weights, in one order on both ends; none elsewhere.
  virtual std::vector<CollectiveRegion> tied_gradients() = 0;
  virtual std::vector<CollectiveRegion> tied_weights() = 0;
  // After a replica's micro-batches: what its reduction still holds handed on (a GPU's last buckets).
  virtual void finish_reduction() {}
  // The squares of the summed gradients of the units [first, end) the rank holds, its shard (a
  // GPU: enqueued).
  virtual void count_squares(size_t first, size_t end) = 0;
  // Waits for the rank's device (`world`'s collectives included): the squares counted.
  virtual double squares(distributed::Communicator& world) = 0;
  // The world's gradient norm, which clips the step.
  virtual void set_grad_norm(double norm) = 0;
  // Clips and steps the optimizer for the rank's shard (nothing when it is empty).
  virtual void step(const OptimizerStep& step) = 0;
  // ZeRO-1's exchange: the flat buffer of the units' weights the group all-gathers (fp32, or a
  // replica's bf16 weights on GPUs) and how a run of units travels between it and the weights
  // (shard_publish.h); no data where the rank has none (ZeRO-2 on CPU ranks), which then publishes
  // through publish_in_buckets().
  virtual PublishedWeights published_weights() = 0;
  virtual ShardCopies shard_copies() = 0;
  // Where the publish carried rounded weights, the other ranks' units' fp32 masters were left as
  // they were: the flat fp32 masters the world all-gathers before anything reads them (a
  // download), once; null when they are current.
  virtual void* take_stale_masters() { return nullptr; }
  virtual void publish_in_buckets() { throw InternalError("a rank without a flat weight buffer"); }
  // ZeRO-1's publish in buckets (shard_publish.h: publish_shard_in_buckets), which a GPU replica
  // runs on its side stream while the next step's first micro-batch computes
  // (cuda_publish_overlap.h): the communicator it runs on (null: the world's), begin_publish()
  // before its first bucket and bucket_published(b) after each. CPU ranks run it in place.
  virtual distributed::Communicator* publish_group() { return nullptr; }
  virtual void begin_publish() {}
  virtual void bucket_published(size_t bucket) { (void)bucket; }
  // While a publish may be in flight: the step observer that the next micro-batch runs with (it
  // waits for each bucket before the first step reading its weights); null when none is.
  virtual runtime::StepObserver* publish_waits() { return nullptr; }
  // The publish finished before whatever the rank enqueues next (the optimizer, the norm, the FP8
  // copies, zeroing, a download, an upload, an evaluation); nothing where it runs in place.
  virtual void settle_publish() {}
  virtual void zero_gradients() = 0;
  virtual std::vector<StateTensor> optimizer_state() = 0;
  // What the rank keeps beside its plan to accumulate gradients (training_device.h).
  virtual size_t gradient_accumulator_bytes() const = 0;
  // debug_time_breakdown: a step starts, and where one of its phases ends (a GPU marks its compute
  // stream, cuda_rank/step_phases.h); nothing on a rank that does not time them.
  virtual void begin_step_phases() {}
  virtual void end_step_phase(const char* phase) { (void)phase; }
};

// A replica's primitives: its whole model on a rank, one micro-batch at a time (run, or enqueued on
// the rank's device), its gradients added up, its losses summed.
class ReplicaRunner {
public:
  virtual ~ReplicaRunner() = default;

  // What each execute of the next micro-batches calls (null: nothing).
  virtual void set_step_observer(runtime::StepObserverList* observers) = 0;
  // One micro-batch: its gradients added up, its losses summed and keep_outputs()'s tensors kept;
  // `last`: the step's last one.
  virtual void run(const MicroBatch& batch, bool last) = 0;
  // After the rank's device waited (RankBackend::squares): the step's summed losses (squares 0);
  // they start again from zero.
  virtual RankMeasure losses() = 0;
  virtual bool has_router_aux_loss() const = 0;
  // The FP8 copies of trained weights rewritten from the weights.
  virtual void refresh_fp8_weight_copies() = 0;
  // fp8_hybrid's scaling state `fp8` on the rank's device, and its history rolled after `step`.
  virtual float* fp8_state(const Fp8State& fp8) = 0;
  virtual void roll_fp8_history(const Fp8State& fp8, int64_t step, float headroom = 1.0f) = 0;
  // Each site's amax recorded since the last roll back to 0, the history untouched (a step not applied).
  virtual void drop_fp8_amaxes(const Fp8State& fp8) = 0;
  // `tensors` (of the rank's plan) kept after each micro-batch run; take_outputs() hands them over.
  virtual void keep_outputs(std::span<const graph::TensorId> tensors) = 0;
  virtual std::vector<KeptOutputs> take_outputs() = 0;
};

// One pipeline stage on a rank: its plans, in the 1F1B schedule (pipeline_stage.h: PipelineStage,
// for every backend).
class StageRunner {
public:
  virtual ~StageRunner() = default;

  // The micro-batch's inputs the stage's plans read: rank `sequence` of a sequence group of
  // `sequence_ranks` keeps its slice of the token inputs (micro_batch.h).
  virtual StageMicroBatch take(std::span<const runtime::InputBinding> inputs, int sequence, int sequence_ranks) = 0;
  // One step's micro-batches through the stage's schedule (run, or enqueued on the rank's device);
  // `peer(stage)` is the world rank of that stage in the rank's replica, at its sequence index.
  virtual void run(std::span<const StageMicroBatch> batches, distributed::Communicator& world,
                   const std::function<int(int stage)>& peer) = 0;
  // After the rank's device waited (RankBackend::squares): the step's summed loss on the last
  // stage, 0 elsewhere.
  virtual double loss() = 0;
  // After the weights changed (the group's and the tied pair's exchanges): what reads them rewritten.
  virtual void refresh_weights() = 0;
};

}  // namespace surogate::train
