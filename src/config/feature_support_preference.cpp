// The feature-support table's rows of preference tuning (`surogate dpo`, train/objective/): what
// this version runs. Kept apart from feature_support.cpp (its size); the table calls
// add_preference_rows in its order.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "config/feature_support_preference.h"

namespace surogate {
namespace {

// Whether a dataset is (`preference` true) or is not (false) of the preference types: both, or only
// `only` when given.
bool has_dataset_of(const Config& c, bool preference, std::optional<DatasetType> only = std::nullopt) {
  for (const auto* list : {&c.data.datasets, &c.eval.validation_datasets}) {
    for (const DatasetConfig& dataset : *list) {
      const bool is_preference = only ? dataset.type == *only
                                      : dataset.type == DatasetType::Preference || dataset.type == DatasetType::Kto;
      if (is_preference == preference) return true;
    }
  }
  return false;
}

bool is_kto(const Config& c) { return c.loss.preference && c.loss.type == "kto"; }

// Judged at the Backend stage: `surogate dpo` sets loss.preference after loading the configuration.
SupportRow preference_row(const char* name, std::function<bool(const Config&)> refuses, const char* key,
                          const char* text) {
  return {name, SupportStage::Backend, SupportBackend::Any,
          [refuses](const Config& config, const RunShape&) { return refuses(config); },
          [key, text](const Config& config, const RunShape&) { return fmt::format("{}: option '{}' {}", config.sources.of(key), key, text); }};
}

}  // namespace

void add_preference_rows(std::vector<SupportRow>& rows) {
  rows.push_back(preference_row(
      "kto with one row per micro-batch",
      [](const Config& c) { return is_kto(c) && c.schedule.per_device_train_batch_size < 2; },
      "per_device_train_batch_size",
      "must be at least 2 for loss.type kto: its KL reference point is estimated from the other rows' completions of "
      "the micro-batch (TRL's KTOTrainer requires the same)"));
  rows.push_back(preference_row(
      "kto reference_free", [](const Config& c) { return is_kto(c) && c.loss.reference_free; }, "loss.reference_free",
      "does not apply to loss.type kto: its rewards and KL reference point are log-ratios to the reference model "
      "(TRL's KTOTrainer has no reference-free form); remove it"));
  rows.push_back(preference_row(
      "preference datasets outside surogate dpo",
      [](const Config& c) { return !c.loss.preference && has_dataset_of(c, true); }, "datasets",
      "has a type: preference / kto dataset, which only `surogate dpo` trains on"));
  rows.push_back(preference_row(
      "surogate dpo on other datasets",
      [](const Config& c) { return c.loss.preference && !is_kto(c) && has_dataset_of(c, false, DatasetType::Preference); },
      "datasets", "must all be type: preference for `surogate dpo` ({prompt, chosen, rejected} rows)"));
  rows.push_back(preference_row(
      "kto on other datasets", [](const Config& c) { return is_kto(c) && has_dataset_of(c, false, DatasetType::Kto); },
      "datasets", "must all be type: kto for `surogate dpo` with loss.type kto ({prompt, completion, label} rows)"));
  rows.push_back(preference_row(
      "surogate dpo with padding_free", [](const Config& c) { return c.loss.preference && c.data.padding_free; },
      "padding_free", "does not apply to `surogate dpo`: each pair is one row (chosen, then rejected); remove it"));
  rows.push_back(preference_row(
      "surogate dpo with a loss_scale strategy",
      [](const Config& c) { return c.loss.preference && c.data.loss_scale != "default"; }, "loss_scale",
      "does not apply to `surogate dpo`: the loss is the preference loss over whole completions; remove it"));
  // Data parallelism (ZeRO-1/2/3) runs, on the ranks of one process or of several: every
  // process's per-pair log-probabilities and counts reach every process in window order
  // (train/objective/process_window_rows.h). Device rows: judged once the layout is known.
  rows.push_back({"surogate dpo with sequence or pipeline parallelism", SupportStage::Device, SupportBackend::Any,
                  [](const Config& c, const RunShape& s) {
                    return c.loss.preference && (s.sequence_size > 1 || s.pipeline_size > 1);
                  },
                  [](const Config& c, const RunShape& s) {
                    const bool sequence = s.sequence_size > 1;
                    const char* key = sequence ? "sequence_parallel_size" : "pipeline_parallel_size";
                    return fmt::format("{}: {}: {} is not run by `surogate dpo` in this version, which runs data "
                                       "parallelism only (a pair's log-probabilities are summed on the one rank that "
                                       "runs the whole pair); this run would use {}. Set sequence_parallel_size: 1 and "
                                       "pipeline_parallel_size: 1",
                                       c.sources.of(key), key, sequence ? s.sequence_size : s.pipeline_size,
                                       s.layout_description);
                  }});
  rows.push_back({"kto on several ranks", SupportStage::Device, SupportBackend::Any,
                  [](const Config& c, const RunShape& s) { return is_kto(c) && s.several_ranks(); },
                  [](const Config& c, const RunShape& s) {
                    return fmt::format("{}: loss.type kto trains on one device in this version: its KL reference "
                                       "point is each micro-batch's, where TRL's KTOTrainer averages it over its "
                                       "processes; this run would use {}. Set gpus: 1",
                                       c.sources.of("gpus"), s.layout_description);
                  }});
}

}  // namespace surogate
