// `surogate dpo`'s training objective (training_objective.h): pairs in, the preference loss
// (ops/preference_loss.h) out, TRL's metrics in the step and eval records.
//
// The reference model costs no second copy of the weights: its log-probabilities are computed once,
// before the first step, with the weights training starts from (the base model: with LoRA the
// adapters start at zero, B = 0, so the policy at step 0 IS the base; with full fine-tuning the
// loaded weights), by the training plan's forward alone where the device offers it
// (TrainingDevice::forward_only; else the whole plan with a zero loss scale), and stored beside the
// token cache (`<output_dir>/tokenized/reference_logps.json`, keyed by the token cache and the
// model): a resumed run reads them back, and refuses to start when they are missing. Losses that
// need no reference (simpo, orpo, reference_free) skip the pass. Under recipe fp8_hybrid a
// forward over the first training pairs first calibrates the FP8 scales (calibrate_fp8_scaling).
//
// With loss.share_prompts (the default) the plan's rows hold each pair's prompt once
// (data/prompt_sharing.h, prompt_sharing_graph.h): the step loop's loader yields them so
// (start_run.cpp), and the reference pass and evaluation lay their batches out the same way.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "train/objective/preference_batch.h"
#include "train/objective/preference_metrics.h"
#include "train/device/training_device.h"
#include "train/objective/training_objective.h"

namespace surogate::train {

// The loss section as the ops read it (dpo_beta is β of every type but orpo, whose β is `beta`).
ops::PreferenceLossOptions preference_loss_options(const config::Loss& loss);

class PreferenceObjective final : public TrainingObjective {
public:
  // `packed_length`: the rows' tokens as packed (sequence_len); with loss.share_prompts the plan's
  // rows are shorter (prompt_sharing_graph.h) and this is where its attention runs.
  PreferenceObjective(const config::Loss& loss, std::filesystem::path reference_file, std::string model,
                      int64_t packed_length);

  ObjectiveGraph rewrite_loss(graph::Graph forward, graph::TensorId loss, const graph::OpRegistry& registry,
                              int64_t batch, int64_t sequence) const override;
  void prepare(const ObjectiveContext& context) override;
  void begin_window(std::span<const data::PackedBatch> window, double loss_scale) override;
  std::vector<runtime::InputBinding> bind(size_t micro) override;
  void observe(TrainingDevice& device) override;
  nlohmann::json step_metrics() override;
  nlohmann::json evaluate() override;

private:
  // Runs every row of `rows` through the device (forward only, or zero loss scale: no update) and
  // returns each row's chosen and rejected log-probs; with `metrics`, adds each micro-batch to it.
  ReferenceLogps forward_split(const data::PackedRowsView& rows, const ReferenceLogps* reference,
                               PreferenceMetrics* metrics, const std::string* kto_labels);
  // fp8_hybrid: a forward over the first kFp8CalibrationPairs training pairs whose amaxes (with
  // headroom) become the scaling history's first value (TrainingDevice::calibrate_fp8_scaling), so
  // that the reference pass and the policy's steps quantize every tensor at the same scale: at
  // step 0 the two log-probabilities are the same bits (the loss ln 2), as in bf16, whichever pairs
  // share a micro-batch. A sample, not the whole set: the pass would otherwise cost as much as the
  // reference pass itself; a later pair whose amax passes twice the sample's raises that site's
  // scale from then on.
  void calibrate_fp8_scaling();
  static constexpr size_t kFp8CalibrationPairs = 256;
  // KTO's labels of the train or eval split (data/kto_rows.h); null for the other losses.
  const std::string* kto_labels(bool train) const;
  std::vector<runtime::InputBinding> bindings_of(const PairInputs& inputs);
  // The window indices of the first `count` micro-batches this process runs (all of them in one
  // process; over several, its ranks': TrainingDevice::takes_micro_batch).
  std::vector<int64_t> taken_indices(size_t count) const;
  // A micro-batch's values the metrics and the reference table read, as one row of doubles
  // (process_window_rows.h: every process's, in window order): `outputs` are its policy log-probs
  // and logit sums (TrainingDevice::kept_outputs), `batch` its packed rows (null: not needed).
  std::vector<double> policy_row(const PairInputs& inputs, const KeptOutputs& outputs,
                                 const data::PackedBatch* batch) const;
  // Adds a policy_row to `metrics` and, with `logps`, writes its pairs' log-probs there.
  void read_policy(const std::vector<double>& row, PreferenceMetrics& metrics, ReferenceLogps* logps) const;
  // read_policy of every process's micro-batches of a window, in window order.
  void read_window(const std::vector<std::pair<int64_t, std::vector<double>>>& mine, PreferenceMetrics& metrics,
                   ReferenceLogps* logps) const;

  // A batch of packed rows as the plan takes it: in the shared layout with loss.share_prompts.
  data::PackedBatch plan_batch(data::PackedBatch packed) const;

  ops::PreferenceLossOptions options_;
  bool share_prompts_ = false;
  int64_t packed_length_ = 0;
  std::filesystem::path reference_file_;
  std::string model_;
  ObjectiveContext context_;
  ReferenceLogps train_reference_, eval_reference_;
  std::string train_labels_, eval_labels_;  // KTO: '1' / '0' per packed row, from the token cache's report
  std::vector<PairInputs> window_;
  float scales_[2] = {0.0f, 0.0f};
  PreferenceMetrics metrics_;
};

}  // namespace surogate::train
