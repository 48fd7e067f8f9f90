// The data-parallel replica strategy of the parallel device (parallel_device.cpp), written once for
// every backend: a ReplicaRankEngine is one rank's part of the step when each rank runs the whole
// model (data and sequence parallelism, docs/architecture.md), driving a ReplicaBackend — what one
// replica rank of a backend is (cpu_data_parallel_ranks.cpp: a CpuBackend and its flat buffer;
// cuda_data_parallel_ranks.cpp: a GPU's CudaRankState) — over the world's communicator:
//   run_micro_batches(): the rank's micro-batches, kept from take() (copied, micro_batch.h: the
//     trainer reuses its buffers), each run with the step observers of its place: the last one's
//     backward reduces ZeRO-1's gradient buckets (gradient_buckets.h), every one's ZeRO-2/3's
//     (sharded_gradients.h) and runs ZeRO-3's gathers.
//   measure(): the rank's losses and the squares of the summed gradients it counts: its shard's
//     (ZeRO-2/3), or all of them (ZeRO-1: every rank holds the same sums; the world's first rank
//     reports them).
//   step_shard() / publish_shard(): each rank clips and steps its shard; ZeRO-1/2 then give every
//     rank every shard's weights (shard_publish.h: the backend's fp32 flat buffer all-gathered, or,
//     where it has none, its bucket staging).
//   finish_update(): the FP8 copies of trained weights rewritten, the gradients zeroed, and
//     fp8_hybrid's scaling state max-reduced over the world and rolled, so every rank quantizes as
//     one rank running the whole window would (quant/fp8_scaling.h).
// Every communicator's collectives come in this one order on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "distributed/communicator.h"
#include "distributed/shard_placement.h"
#include "runtime/step_observer.h"
#include "train/device/fp8_state.h"
#include "train/device/micro_batch.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/shard_publish.h"

namespace surogate::train {

// One replica rank of a backend: the whole model's plan on the rank's device, its gradients, its
// optimizer over its shard of the trainable units (the trainable tensors in plan order), and the
// replica reduction's step observers. Everything runs on the rank's thread.
class ReplicaBackend {
public:
  virtual ~ReplicaBackend() = default;

  // What each execute of the next micro-batches calls (null: nothing).
  virtual void set_step_observer(runtime::StepObserverList* observers) = 0;
  // One micro-batch (run, or enqueued on the rank's device): its gradients added up, its losses
  // summed and keep_outputs()'s tensors kept; `last`: the step's last one.
  virtual void run(const MicroBatch& batch, bool last) = 0;
  // After the step's micro-batches: what the reduction still holds handed on (a GPU's last buckets).
  virtual void finish_batches() {}
  // The squares of the summed gradients of the units [first, end) the rank holds (a GPU: enqueued,
  // its clip factor with them).
  virtual void count_squares(size_t first, size_t end) = 0;
  // Whether the rank clips by its own count of replicated (ZeRO-1) gradients, so counts them though
  // another rank reports them (a GPU: its clip factor is computed with the squares).
  virtual bool clips_by_own_squares() const { return false; }
  // Waits for the rank's device (`world`'s collectives included): the step's summed losses and the
  // squares counted; the losses start again from zero.
  virtual RankMeasure measure(distributed::Communicator& world) = 0;
  virtual bool has_router_aux_loss() const = 0;
  // The world's gradient norm, which clips the step.
  virtual void set_grad_norm(double norm) = 0;
  // Clips and steps the optimizer for the rank's shard (nothing when it is empty).
  virtual void step(const OptimizerStep& step) = 0;
  // ZeRO-1/2's exchange: the fp32 flat buffer of the trainable weights the world all-gathers and
  // how a run of units travels between it and the weights (shard_publish.h); null where the
  // backend has none, which then publishes through publish_in_buckets().
  virtual void* flat_weights() = 0;
  virtual ShardCopies shard_copies() = 0;
  virtual void publish_in_buckets() { throw InternalError("a replica backend without a flat weight buffer"); }
  // The FP8 copies of trained weights rewritten from the weights.
  virtual void refresh_fp8_weight_copies() = 0;
  // fp8_hybrid's scaling state `fp8` on the rank's device, and its history rolled after `step`.
  virtual float* fp8_state(const Fp8State& fp8) = 0;
  virtual void roll_fp8_history(const Fp8State& fp8, int64_t step) = 0;
  virtual void zero_gradients() = 0;
  virtual std::vector<StateTensor> optimizer_state() = 0;
  virtual size_t gradient_accumulator_bytes() const = 0;
  // `tensors` (of the rank's plan) kept after each micro-batch run; take_outputs() hands them over.
  virtual void keep_outputs(std::span<const graph::TensorId> tensors) = 0;
  virtual std::vector<KeptOutputs> take_outputs() = 0;
};

// What every replica engine of a backend's ranks reads (written before the engines run).
struct ReplicaShared {
  const compiler::ExecutionPlan* plan = nullptr;       // the trainer's (its inputs' ids)
  const compiler::ExecutionPlan* rank_plan = nullptr;  // what the ranks run (ZeRO-3: weights in gather buffers)
  std::vector<size_t> shard_sizes;  // the all-gather's pieces (elements of the flat buffer), one per rank
  size_t units = 0;                 // the trainable units
  std::optional<Fp8State> fp8;      // fp8_hybrid's scaling state, in each rank's plan
  bool shard_gradients = false;     // ZeRO-2/3
};

class ReplicaRankEngine final : public RankEngine {
public:
  // World rank `global_rank`'s engine; `shared` must outlive it.
  ReplicaRankEngine(const ReplicaShared& shared, int global_rank)
      : shared_(shared), counts_replicated_(global_rank == 0) {}

  void take(std::span<const runtime::InputBinding> inputs, int sequence, int sequence_ranks) override;
  void run_micro_batches() override;
  RankMeasure measure() override;
  bool has_router_aux_loss() const override { return backend->has_router_aux_loss(); }
  void set_grad_norm(double norm) override { backend->set_grad_norm(norm); }
  void step_shard(const OptimizerStep& step) override { backend->step(step); }
  void publish_shard() override;
  void finish_update(const OptimizerStep& step) override;
  void zero_gradients() override { backend->zero_gradients(); }
  std::vector<StateTensor> optimizer_state() override { return backend->optimizer_state(); }
  size_t gradient_accumulator_bytes() const override { return backend->gradient_accumulator_bytes(); }
  // The trainer plan's tensors matched by name in the plan the rank runs (ZeRO-3's is a copy).
  void keep_outputs(std::span<const graph::TensorId> tensors) override;
  std::vector<KeptOutputs> take_outputs() override { return backend->take_outputs(); }

  distributed::Shard shard;  // of the trainable units
  std::unique_ptr<ReplicaBackend> backend;
  std::unique_ptr<distributed::Communicator> world;  // on the rank's device (a GPU: its stream)
  runtime::StepObserverList first_batches, last_batch;  // what each micro-batch's execute calls

private:
  const ReplicaShared& shared_;
  bool counts_replicated_;  // ZeRO-1: the world's first rank reports the summed gradients' squares
  std::vector<MicroBatch> pending_;
};

}  // namespace surogate::train
