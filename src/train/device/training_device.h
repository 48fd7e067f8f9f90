// What the trainer needs from a device, so that one step loop (train/run/step_loop.cpp) drives the CPU
// and the CUDA backend alike. A TrainingDevice owns the backend with the loaded plan, the
// trainable parameters' master weights, their gradients and the optimizer state.
//
// The host side always sees fp32 copies of every parameter (weights(), trainable()) and the
// optimizer state as host tensors (optimizer_state(), the CPU optimizers' names and layout), so
// weight loading, checkpoints and outputs are one code path whatever the device:
//   - after writing host weights or state (initialisation, loading, resume): upload();
//   - before reading them (evaluation, checkpoint, outputs): download().
// On the CPU device both are no-ops: the host views are the backend's own buffers.
//
// One optimizer step: accumulate() once per micro-batch (gradients add up), then measure()
// (the window's summed loss and the global gradient norm before clipping; the one place that
// waits for the device), then update() (clip to max_grad_norm, optimizer step, zero gradients),
// or skip_update() when the step is not applied.
// A data-parallel device (data_parallel_ranks() > 1) takes gradient_accumulation_steps micro-batches
// per rank each step and spreads them over its ranks (train/device/parallel/parallel_device.cpp over the
// backend's rank engines, parallel/rank_engine.h). When the ranks are spread over several processes
// (distributed/process_world.h), each process's device is given only the micro-batches its own
// ranks train (takes_micro_batch), and window_totals() adds up the whole window's counts.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/execution_plan.h"
#include "config/config.h"
#include "distributed/process_world.h"
#include "graph/op_registry.h"
#include "models/model_spec.h"
#include "models/quantized_weight.h"
#include "train/quantized_weights.h"
#include "runtime/backend.h"
#include "train/checkpoint_io.h"
#include "train/device/gradient_buckets.h"
#include "train/device/host_offload_plan.h"
#include "train/evaluator.h"
#include "train/optim/optimizer.h"

namespace surogate::runtime {
class CudaOpTable;  // runtime/cuda_op_table.h
}

namespace surogate::train {

struct PipelinePlan;  // train/pipeline_plan.h

// The counts of one micro-batch that the loss normalisation and the log need.
struct MicroBatchTotals {
  double loss_weight = 0.0;  // Σ token weights (= loss tokens unless loss_scale weighs tokens)
  int64_t loss_tokens = 0;
  int64_t tokens = 0;
};

// A micro-batch's values of the outputs keep_outputs() named, in the order named.
using KeptOutputs = std::vector<std::vector<float>>;

struct StepMetrics {
  double loss = 0.0;       // sum of the micro-batches' losses
  double grad_norm = 0.0;  // global L2 norm of the accumulated gradients, before clipping
  // MoE models training with the router load-balancing loss: the sum of the micro-batches'
  // unweighted aux losses (the plan's "router_aux_loss" output; models/decoder_graph.h).
  std::optional<double> router_aux_loss;
};

class TrainingDevice {
public:
  virtual ~TrainingDevice() = default;
  // One line for the log: backend and precision.
  virtual std::string description() const = 0;

  // Host fp32 copies of every parameter, in the order of the specs given at construction, and
  // the subset with gradients (what the optimizer updates and checkpoints hold).
  virtual std::span<const WeightView> weights() const = 0;
  virtual std::span<const WeightView> trainable() const = 0;
  // The optimizer state as host tensors (for checkpoints; restore fills them, then upload()).
  virtual std::vector<StateTensor> optimizer_state() = 0;

  // Ranks training together: each optimizer step's window is gradient_accumulation_steps × this
  // many micro-batches, all given to accumulate() in window order.
  virtual int data_parallel_ranks() const { return 1; }
  // Whether this process trains micro-batch `index` of the window: all of them unless the ranks
  // are spread over processes. accumulate() is given exactly these, in window order.
  virtual bool takes_micro_batch(int64_t index) const { return index >= 0; }
  // The sum over the whole window of `taken` (the counts of the micro-batches this process took,
  // in window order), added in window order: the same bits in every process and for every split
  // of the ranks into processes. Every process calls it once per step, before accumulate().
  virtual MicroBatchTotals window_totals(std::span<const MicroBatchTotals> taken);

  virtual void upload() = 0;
  virtual void download() = 0;
  // Before each evaluation, on every process (the leader's evaluator then reads the weights): a
  // device whose evaluator cannot read the weights where training keeps them brings them there
  // (ZeRO-3: the shards gathered into the host copies). Collective; nothing by default.
  virtual void before_evaluation() {}
  // True when weights(), trainable() and optimizer_state() are the memory training updates (the
  // CPU backend's own buffers): a checkpoint must copy them before training goes on. False when
  // they are host copies that only download() writes (GPUs): a checkpoint reads them in place
  // until the next download().
  virtual bool host_views_are_live() const { return true; }

  // The frozen weights the plan stores quantized (models/quantized_weight.h) are not among weights();
  // each loaded one is handed here once, before upload(), quantized on the host (the trainer:
  // train/quantized_weights.h), and written to the device (every rank's). The caller reuses the
  // pieces' memory for the next weight: a device that keeps them keeps a copy.
  virtual void store_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) = 0;

  // The backend holding every weight of the plan, for a model that reads them in place (GRPO's
  // rollouts: generate/kv_cache_model.h's open_kv_cache_on_weights); null when no single backend
  // of this process holds them all.
  virtual const runtime::Backend* weights_backend() const { return nullptr; }
  // The ranks of this process whose backend each holds every weight of the plan (GRPO's rollouts
  // on every rank): 1 on a single device with a weights_backend(), a data-parallel device's local
  // replicas (ZeRO-1/2: identical weights after every step), else 0 (ZeRO-3's shards, pipeline
  // stages, sequence slices).
  virtual int weight_ranks() const { return weights_backend() != nullptr ? 1 : 0; }
  // work(rank, backend) for each of weight_ranks() at once, each on the rank's own thread (its GPU
  // current) with the backend holding its weights, the last update's writes finished; returns when
  // all have, rethrowing the first error. A single device: on this thread.
  virtual void on_weight_ranks(const std::function<void(int rank, const runtime::Backend& weights)>& work);

  virtual void accumulate(std::span<const runtime::InputBinding> inputs) = 0;
  // A forward output of the last micro-batch accumulate() ran (an F32 tensor the plan marks as an
  // output), copied to the host. Single devices only, which run a micro-batch in accumulate(): the
  // default (a multi-rank device) is an internal error; keep_outputs() serves every device.
  virtual std::vector<float> read_output(graph::TensorId tensor);
  // A training objective's per-micro-batch outputs (F32 tensors the plan marks as outputs: the
  // per-sequence log-probabilities, train/objective/), on any device and any number of ranks:
  // after keep_outputs(tensors), every micro-batch keeps its values of `tensors`, and after
  // measure() kept_outputs() hands them over (and forgets them): one KeptOutputs per micro-batch
  // given to accumulate() since the last call, in the order given. A multi-rank device runs its
  // micro-batches only in measure(), so they cannot be read earlier.
  virtual void keep_outputs(std::vector<graph::TensorId> tensors) { kept_tensors_ = std::move(tensors); }
  virtual std::vector<KeptOutputs> kept_outputs() { return std::exchange(kept_, {}); }
  // The forward of one micro-batch only, its outputs kept as accumulate()'s (a training
  // objective's reference and evaluation passes): no backward, no gradient read or written, no
  // loss added to the window's, the outputs bit for bit those accumulate() gives. For plans whose forward phase computes no
  // gradient (a preference plan; not an SFT plan, whose LM-head loss gives its gradients in the
  // forward, compiler/loss_input_grad.h). False where the device has no forward-only path (nothing
  // ran): the caller runs accumulate() with a zero loss scale, then skip_update().
  virtual bool forward_only(std::span<const runtime::InputBinding> /*inputs*/) { return false; }
  virtual StepMetrics measure() = 0;
  virtual void update(const OptimizerStep& step) = 0;
  // Instead of update() for a step that is not applied (a non-finite loss or gradient): the
  // accumulated gradients are zeroed, the weights and optimizer state stay as they are, and a
  // quantized recipe's amaxes recorded during the step are dropped.
  virtual void skip_update() = 0;
  // fp8_hybrid's calibration (nothing on a plan without FP8 scaling state), which `surogate dpo`
  // runs before its reference pass so that the pass and the first steps quantize at the same
  // scales (train/objective/preference_objective.h): while keep_fp8_amaxes(true) holds,
  // forward_only() and skip_update() leave the amaxes recorded since the last roll in place;
  // calibrate_fp8_scaling() then moves them (every rank's max, times quant::kFp8CalibrationHeadroom)
  // into the history as the step before the first (slot history − 1), so that every step from the
  // first scales by them (or a larger later amax) instead of each tensor's own amax. Collective on
  // several ranks.
  virtual void keep_fp8_amaxes(bool keep) = 0;
  virtual void calibrate_fp8_scaling() = 0;

  // What one rank keeps beside its plan to accumulate gradients across micro-batches, in bytes
  // (a data-parallel device: its largest local rank's; ZeRO-2/3: the shard's accumulators and the
  // bucket staging, sharded_gradients.h). 0 where the plan's gradient region is the accumulator
  // (the plain CPU device).
  virtual size_t gradient_accumulator_bytes() const { return 0; }

  // debug_time_breakdown: milliseconds per "phase:op" of the last micro-batch run (waits for it);
  // empty on devices without per-op timing (the CPU).
  virtual std::vector<std::pair<std::string, double>> time_breakdown() { return {}; }
  // debug_time_breakdown on the parallel device: the first rank's GPU milliseconds in each phase of
  // the last complete step (train/device/cuda_rank/step_phases.h), after measure() waited; empty
  // elsewhere and at the first step.
  virtual std::vector<std::pair<std::string, double>> step_phases() { return {}; }

  // The validation evaluator that reads this device's current weights (see train/evaluator.h).
  virtual std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) = 0;

protected:
  // The single devices, at the end of accumulate(): the micro-batch's kept outputs, through read_output().
  void keep_micro_batch_outputs();

private:
  std::vector<graph::TensorId> kept_tensors_;
  std::vector<KeptOutputs> kept_;
};

// What both devices are built from. `specs` are every parameter of the plan (base model, then
// LoRA adapters); those with a gradient in the plan are trainable. Weights the plan stores
// quantized (QLoRA) are not among them: they arrive through store_quantized().
struct TrainingDeviceSetup {
  const compiler::ExecutionPlan* plan = nullptr;  // must outlive the device
  const graph::OpRegistry* registry = nullptr;
  std::vector<models::ParameterSpec> specs;
  const Config* config = nullptr;                  // optimizer, its settings, max_grad_norm, accumulation
  // The data-parallel device even for a world of one (tests: the gloo / NCCL path on one rank).
  bool data_parallel_device = false;
  // The processes of the run (null: this process alone). Their ranks join one data-parallel world.
  distributed::ProcessWorld* world = nullptr;
  // The staged offload step's chunk size (host_offload_plan.h; tests make it small).
  size_t offload_chunk_bytes = kOffloadChunkBytes;
  // Data parallelism: the gradient buckets' size (gradient_buckets.h; tests make it small).
  size_t gradient_bucket_bytes = kGradientBucketBytes;
  // pipeline_parallel_size > 1: the stages' plans (`plan` is then the whole model's forward plan,
  // whose inputs the trainer binds); must outlive the device.
  const PipelinePlan* pipeline = nullptr;
  // CUDA: the kernel table a rank's backend binds from (sequence parallelism: the built-in table and
  // the exchange ops bound to its group, distributed/sequence_exchange_cuda.h); null: the built-in.
  const runtime::CudaOpTable* cuda_ops = nullptr;
};

// Norms and biases get no weight decay; NorMuon orthogonalises only hidden 2-D matrices.
bool applies_weight_decay(const std::string& parameter_name);
bool is_hidden_matrix(const std::string& parameter_name, const std::vector<int64_t>& shape);

std::unique_ptr<TrainingDevice> make_cpu_training_device(const TrainingDeviceSetup& setup);
// Only in CUDA builds (device/cuda_training_device.cpp); the caller checks the selection first.
// Both return their data-parallel device when the configuration asks for several ranks.
std::unique_ptr<TrainingDevice> make_cuda_training_device(const TrainingDeviceSetup& setup);

}  // namespace surogate::train
