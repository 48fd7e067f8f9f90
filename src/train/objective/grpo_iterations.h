// GRPO with the importance ratio or the KL term (num_iterations > 1 or beta ≠ 0), as TRL's
// GRPOTrainer computes them: each generation batch (one optimizer step's completions) is trained
// num_iterations times — the same completions and micro-batches, TRL's buffered inputs — with
//   old_logp  the policy's per-token log-probabilities at generation time (num_iterations > 1;
//             a forward-only pass before the first update, dropout off), else logp itself (r = 1);
//   ref_logp  the reference model's (beta ≠ 0; grpo_reference.h, the base without the adapter);
//   logp      the policy's at the step's weights: a forward-only pass of the training graph
//             (grpo_token_graph.h) before each step, with the dropout masks the step draws.
// grpo_loss (ops/grpo_loss.h, TRL's _compute_loss term for term) then gives the step's loss, `kl`
// and `clip_ratio/*`, and its backward the coefficients c_t = ∂loss/∂logp_t that the graph's
// Σ c_t·logp_t turns into TRL's gradient. The cost: one more forward per step (two at a generation
// step with num_iterations > 1), and the reference model's decode pass per generation with beta.
//
// The buffered generation (completions, advantages, old and reference log-probabilities, its
// reward records) and the iteration are checkpoint state: a run resumed between two iterations
// trains the next one on the very same batch.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/packing.h"
#include "ops/grpo_loss.h"
#include "rl/completion_batch.h"
#include "runtime/backend.h"
#include "train/objective/training_objective.h"

namespace surogate::train {

// One generation batch: completion i's prompt and tokens, its advantage, the [B, width] old and
// reference log-probabilities (empty when not used) and the generation's step record entries.
struct GrpoGeneration {
  std::vector<std::vector<int32_t>> prompts, completions;
  std::vector<double> advantages, old_logps, ref_logps;
  nlohmann::json metrics;

  nlohmann::json to_json() const;
  static GrpoGeneration from_json(const nlohmann::json& json);
};

// What the step trains on: the micro-batches of a generation (grpo_window.h's rows) and its masks.
struct GrpoLayout {
  std::vector<data::PackedBatch> batches;
  rl::CompletionBatch completions;
};

struct GrpoIterationSettings {
  int64_t num_iterations = 1;
  double temperature = 1.0;
  int64_t batch = 1;    // completions per micro-batch
  int64_t width = 1;    // max_completion_length
  uint64_t train_seed = 0;  // the run's, for the dropout masks the step loop draws (batch_inputs.h)
  ops::GrpoLossOptions loss;
  // Lays a generation's completions out as micro-batches (grpo_window.h with the run's options).
  std::function<GrpoLayout(const GrpoGeneration&)> lay_out;
  // The reference model's log-probabilities of a generation's completions (beta ≠ 0), else unset.
  std::function<std::vector<double>(const GrpoGeneration&)> reference;
};

class GrpoIterations {
public:
  // `saved`: checkpoint_state() of the checkpoint a run resumes from, or null.
  GrpoIterations(const ObjectiveContext& context, GrpoIterationSettings settings, const nlohmann::json& saved);

  // Whether the next window trains on the buffered generation again (no rollouts then).
  bool replays() const { return generation_.has_value() && iteration_ > 0; }
  // A new generation, laid out (`batches`: its micro-batches, written; `metrics`: its record
  // entries, kept for the replays): the old and reference passes, then the step's.
  void start(GrpoGeneration generation, std::span<data::PackedBatch> batches, nlohmann::json& metrics);
  // The next iteration on the buffered generation.
  void replay(std::span<data::PackedBatch> batches, nlohmann::json& metrics);

  void begin_window(double loss_scale);
  std::vector<runtime::InputBinding> bind(size_t micro) const;
  nlohmann::json checkpoint_state() const;

private:
  // The policy's [B, width] log-probabilities at the device's weights; `dropout_step`: the step
  // whose dropout masks the pass draws, or none (dropout off).
  std::vector<double> policy_logps(std::optional<int64_t> dropout_step);
  void train_window(std::span<data::PackedBatch> batches, nlohmann::json& metrics);

  ObjectiveContext context_;
  GrpoIterationSettings settings_;
  std::optional<GrpoGeneration> generation_;
  GrpoLayout layout_;
  std::vector<std::vector<int32_t>> token_ids_;     // per micro-batch, [batch, sequence]
  std::vector<std::vector<double>> coefficients_;   // per micro-batch, [batch · width], loss scale 1
  std::vector<std::vector<float>> bound_;           // coefficients_ × the window's loss scale
  std::vector<float> zeros_;
  int64_t iteration_ = 0;  // of the buffered generation, for the next window
  int64_t windows_ = 0;    // windows made by the run (the step loop's step of the next one)
  graph::TensorId token_ids_tensor_, coefficients_tensor_, dropout_seed_tensor_ = graph::kNoTensor;
};

}  // namespace surogate::train
