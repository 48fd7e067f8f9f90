// A training mode's seam: what the step loop asks of a mode whose loss is not the decoder's token
// cross-entropy. `surogate sft` / `pt` have no objective (the LM head's loss, train/batch_inputs.h);
// `surogate dpo` runs the preference objective (preference_objective.h: dpo, ipo, simpo, orpo, kto),
// `surogate grpo` GRPO's (grpo_objective.h, which also makes its own windows: make_window). The calls:
//   rewrite_loss   the forward graph with the mode's loss in place of the LM-head cross-entropy
//                  (the graph's "loss"), as the mode's ops compute it;
//   prepare        what is computed once before the first step (the reference log-probabilities);
//   begin_window / bind
//                  the mode's own graph inputs for each micro-batch of an optimizer step's window
//                  (the window's normaliser known before the first one runs);
//   observe        after the window's micro-batches ran (the device's measure(), every rank's):
//                  reads back what the mode logs (TrainingDevice::kept_outputs);
//   step_metrics / evaluate
//                  the step record's metrics (TRL's names), and the same on the validation split.
// The objective only builds inputs and reads outputs; the graph's ops compute the loss and its
// gradients on either backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/execution_plan.h"
#include "config/config.h"
#include "data/data_loader.h"
#include "data/packing.h"
#include "data/token_cache.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "models/lora.h"
#include "runtime/backend.h"
#include "train/batch_inputs.h"

namespace surogate::distributed {
class ProcessWorld;  // distributed/process_world.h
}

namespace surogate::train {

class TrainingDevice;  // train/device/training_device.h

// What an objective works with once the run's plan, device and data exist.
struct ObjectiveContext {
  const compiler::ExecutionPlan* plan = nullptr;
  TrainingDevice* device = nullptr;
  BatchInputs* inputs = nullptr;  // the decoder's inputs (token ids, positions, documents, targets)
  std::shared_ptr<const data::TokenCache> cache;
  int64_t batch = 1;
  int32_t pad_id = 0;
  bool resumed = false;  // the run continues from a checkpoint (its weights are no longer the reference)
  std::function<void(const std::string&)> message;
  nlohmann::json saved_state;  // what checkpoint_state() returned when the resumed checkpoint was saved
  const models::LoraSetup* lora = nullptr;  // the LoRA adapters the plan carries, or null
  bool cuda = false;                        // the device is the CUDA backend's
  std::function<void(const std::string& type, nlohmann::json record)> log;  // a record of the run's log
  // The processes of the run (distributed/process_world.h; null: this process alone). Every
  // process runs the objective; the leader's records are the run's.
  distributed::ProcessWorld* world = nullptr;
};

// A rewritten forward graph and its loss.
struct ObjectiveGraph {
  graph::Graph graph;
  graph::TensorId loss = graph::kNoTensor;
};

class TrainingObjective {
public:
  virtual ~TrainingObjective() = default;
  // `loss`: the forward graph's (the LM head's cross-entropy); micro-batches of [batch, sequence].
  virtual ObjectiveGraph rewrite_loss(graph::Graph forward, graph::TensorId loss, const graph::OpRegistry& registry,
                                      int64_t batch, int64_t sequence) const = 0;
  virtual void prepare(const ObjectiveContext& context) = 0;
  // `loss_scale`: what the loss is multiplied by (fp16 loss scaling; 1 otherwise).
  virtual void begin_window(std::span<const data::PackedBatch> window, double loss_scale) = 0;
  // The bindings of micro-batch `micro` of the window; after BatchInputs::bind of the same batch.
  virtual std::vector<runtime::InputBinding> bind(size_t micro) = 0;
  // After the device's measure() of the window: every micro-batch's outputs are there.
  virtual void observe(TrainingDevice& device) = 0;
  // The metrics of the window's micro-batches since the last call (TRL's names).
  virtual nlohmann::json step_metrics() = 0;
  // Every validation row once, with the device's current weights: {"eval_loss", "eval_rewards/..."}.
  virtual nlohmann::json evaluate() = 0;
  // An RL mode (GRPO) makes each window's micro-batches itself — its prompts read from `loader`,
  // completions sampled with the current weights and weighed by their rewards — in place of the
  // step loop's reading them from the loader; `batches` holds one per micro-batch of the window.
  virtual bool makes_window() const { return false; }
  virtual void make_window(data::DataLoader& /*loader*/, std::span<data::PackedBatch> /*batches*/) {}
  // What a checkpoint keeps of the objective for an exact resume (GRPO: the sampling seeds), given
  // back as ObjectiveContext::saved_state; null when nothing.
  virtual nlohmann::json checkpoint_state() const { return nullptr; }
};

// The configuration's objective (loss.preference: the preference objective; grpo.enabled: GRPO's),
// or null.
std::unique_ptr<TrainingObjective> make_training_objective(const Config& config);

}  // namespace surogate::train
