// The feature-support table's rows of `surogate grpo` (train/objective/grpo_objective.h): what this
// version runs — one device, beta 0 with full fine-tuning — and what it refuses, each naming its option. Kept apart from
// feature_support.cpp (its size); the table calls add_grpo_rows in its order.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "config/feature_support_grpo.h"

namespace surogate {
namespace {

bool has_prompt_dataset(const Config& c) {
  for (const auto* list : {&c.data.datasets, &c.eval.validation_datasets}) {
    for (const DatasetConfig& dataset : *list) {
      if (dataset.type == DatasetType::Prompt) return true;
    }
  }
  return false;
}

bool has_other_dataset(const Config& c) {
  for (const DatasetConfig& dataset : c.data.datasets) {
    if (dataset.type != DatasetType::Prompt) return true;
  }
  return false;
}

bool has_other_validation_dataset(const Config& c) {
  return std::any_of(c.eval.validation_datasets.begin(), c.eval.validation_datasets.end(),
                     [](const DatasetConfig& dataset) { return dataset.type != DatasetType::Prompt; });
}

bool sets_grpo_option(const Config& c) {
  for (const auto& [key, source] : c.sources.by_key) {
    if (key == "grpo" || key.starts_with("grpo.")) return true;
  }
  return false;
}

// Judged at the Backend stage: `surogate grpo` sets grpo.enabled after loading the configuration.
// `refuses` sees the configuration only when the run is (or, with `inside` false, is not) grpo.
SupportRow grpo_row(const char* name, bool inside, std::function<bool(const Config&)> refuses, const char* key,
                    std::function<std::string(const Config&)> text) {
  return {name, SupportStage::Backend, SupportBackend::Any,
          [inside, refuses](const Config& config, const RunShape&) {
            return config.grpo.enabled == inside && refuses(config);
          },
          [key, text](const Config& config, const RunShape&) {
            return fmt::format("{}: option '{}' {}", config.sources.of(key), key, text(config));
          }};
}

std::function<std::string(const Config&)> says(const char* text) {
  return [text](const Config&) { return std::string(text); };
}

}  // namespace

void add_grpo_rows(std::vector<SupportRow>& rows) {
  rows.push_back(grpo_row("grpo options outside surogate grpo", false, sets_grpo_option, "grpo",
                          says("is read only by `surogate grpo`; remove it (or run `surogate grpo`)")));
  rows.push_back(grpo_row("prompt datasets outside surogate grpo", false, has_prompt_dataset, "datasets",
                          says("has a type: prompt dataset, which only `surogate grpo` trains on")));
  rows.push_back(grpo_row("surogate grpo on other datasets", true, has_other_dataset, "datasets",
                          says("must all be type: prompt for `surogate grpo` (rows with a prompt and the columns the "
                               "reward functions read)")));
  rows.push_back(grpo_row("surogate grpo on other validation datasets", true, has_other_validation_dataset,
                          "validation_datasets",
                          says("must all be type: prompt for `surogate grpo` (its evaluation samples completions of "
                               "the validation prompts and scores them)")));
  rows.push_back(grpo_row(
      "surogate grpo without reward functions", true, [](const Config& c) { return c.grpo.reward_functions.empty(); },
      "grpo.reward_functions",
      says("is empty: give at least one, e.g. [\"rewards.py:correct_answer\"] or [exact_match] (docs/grpo.md)")));
  rows.push_back(grpo_row(
      "surogate grpo with a KL term and full fine-tuning", true,
      [](const Config& c) { return c.grpo.beta != 0.0 && !c.lora.enabled; }, "grpo.beta",
      [](const Config& c) {
        return fmt::format("is {}: the KL term's reference is the base model without the LoRA adapter, and full "
                           "fine-tuning keeps no frozen copy of the starting weights in this version; use lora: true "
                           "or set beta: 0 (TRL's default)", c.grpo.beta);
      }));
  rows.push_back(grpo_row(
      "surogate grpo with a partial group per step", true,
      [](const Config& c) {
        const int64_t completions = c.schedule.per_device_train_batch_size *
                                    std::max<int64_t>(1, c.schedule.gradient_accumulation_steps);
        return completions % c.grpo.num_generations != 0;
      },
      "per_device_train_batch_size",
      [](const Config& c) {
        return fmt::format("× gradient_accumulation_steps ({} × {}) counts the completions of a step and must be a "
                           "multiple of grpo.num_generations ({}), as in TRL",
                           c.schedule.per_device_train_batch_size, c.schedule.gradient_accumulation_steps,
                           c.grpo.num_generations);
      }));
  rows.push_back(grpo_row("surogate grpo with sequence_len", true,
                          [](const Config& c) { return c.sources.by_key.contains("sequence_len"); }, "sequence_len",
                          says("does not apply to `surogate grpo`: a row holds max_prompt_length + "
                               "max_completion_length tokens; remove it")));
  rows.push_back(grpo_row("surogate grpo with padding_free", true, [](const Config& c) { return c.data.padding_free; },
                          "padding_free", says("does not apply to `surogate grpo`: each completion is one row")));
  rows.push_back(grpo_row(
      "surogate grpo with a loss_scale strategy", true, [](const Config& c) { return c.data.loss_scale != "default"; },
      "loss_scale", says("does not apply to `surogate grpo`: the completion tokens are weighed by their advantages")));
  // QLoRA's quantized base and fp8_hybrid's FP8 weights are read in place by the rollouts (the
  // decode graph rewritten as the trainer's: generate/kv_cache_plans.h); these are not.
  rows.push_back(grpo_row(
      "surogate grpo with the nvfp4 recipe", true, [](const Config& c) { return c.precision.recipe == Recipe::Nvfp4; },
      "recipe", says("is nvfp4: rollouts read the trainer's weights in place, and the nvfp4 recipe's FP4 weights are "
                     "not read there yet; use recipe: bf16 or fp8_hybrid (or qlora_fp4 for an NVFP4 base)")));
  rows.push_back(grpo_row(
      "surogate grpo with offload_quants", true, [](const Config& c) { return c.offload.offload_quants; },
      "offload_quants", says("keeps the quantized base in host memory, gathered a layer at a time for training; the "
                             "rollouts read the base in place on the device: remove it")));
  rows.push_back({"surogate grpo on several ranks", SupportStage::Device, SupportBackend::Any,
                  [](const Config& c, const RunShape& s) {
                    return c.grpo.enabled && (s.several_ranks() || s.spans_processes() || s.data_parallel_device);
                  },
                  [](const Config& c, const RunShape& s) {
                    return fmt::format("{}: `surogate grpo` trains on one device in this version (rollouts and "
                                       "rewards run in this process); this run would use {}. Set gpus: 1",
                                       c.sources.of("gpus"), s.layout_description);
                  }});
}

}  // namespace surogate
