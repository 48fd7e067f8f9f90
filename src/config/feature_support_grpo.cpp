// The feature-support table's rows of `surogate grpo` (train/objective/grpo_objective.h): what this
// version runs — one device, data-parallel ranks (ZeRO-1/2) of one process or of several (one
// update per generation, no KL term), the KL term with LoRA or full fine-tuning — and what it refuses, each naming its option. Kept apart from feature_support.cpp
// (its size); the table calls add_grpo_rows in its order.
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
      "surogate grpo with a partial group per step", true,
      [](const Config& c) {
        const int64_t completions = c.schedule.per_device_train_batch_size *
                                    std::max<int64_t>(1, c.schedule.gradient_accumulation_steps);
        return completions % c.grpo.num_generations != 0;
      },
      "per_device_train_batch_size",
      [](const Config& c) {
        return fmt::format("× gradient_accumulation_steps ({} × {}) counts the completions a rank samples each "
                           "step and must be a multiple of grpo.num_generations ({}): each rank samples whole "
                           "groups (TRL asks it of the whole step's completions only)",
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
  // Data-parallel ranks of one process (ZeRO-1/2) run: each rank samples its share of the prompts
  // on its own replica's weights (train/objective/grpo_rank_models.h). Device rows: judged once the
  // layout is known.
  rows.push_back({"surogate grpo with sequence or pipeline parallelism", SupportStage::Device, SupportBackend::Any,
                  [](const Config& c, const RunShape& s) {
                    return c.grpo.enabled && (s.sequence_size > 1 || s.pipeline_size > 1);
                  },
                  [](const Config& c, const RunShape& s) {
                    const bool sequence = s.sequence_size > 1;
                    const char* key = sequence ? "sequence_parallel_size" : "pipeline_parallel_size";
                    return fmt::format("{}: {}: {} is not run by `surogate grpo` in this version, which runs data "
                                       "parallelism only (a rank's rollouts read the whole model on its device); this "
                                       "run would use {}. Set sequence_parallel_size: 1 and pipeline_parallel_size: 1",
                                       c.sources.of(key), key, sequence ? s.sequence_size : s.pipeline_size,
                                       s.layout_description);
                  }});
  rows.push_back({"surogate grpo with sharded weights", SupportStage::Device, SupportBackend::Any,
                  [](const Config& c, const RunShape& s) {
                    return c.grpo.enabled && (c.parallel.zero_level >= 3 || c.parallel.shard_weights) &&
                           (s.several_ranks() || s.data_parallel_device);
                  },
                  [](const Config& c, const RunShape&) {
                    const char* key = c.parallel.zero_level >= 3 ? "zero_level" : "shard_weights";
                    return fmt::format("{}: option '{}' shards the weights over the ranks (ZeRO-3), and the rollouts "
                                       "of `surogate grpo` read the whole model in place on each rank (no rank holds "
                                       "it); use zero_level 1 or 2",
                                       c.sources.of(key), key);
                  }});
  // Several processes (a launcher or Ray) run the one-update path: each process samples its ranks'
  // completions and every process gets all of them (train/objective/grpo_process_rollouts.h). The
  // ratio and the KL term keep every rank's per-token log-probabilities (and the buffered
  // generation of the checkpoint) in the process that computes the loss coefficients: not yet.
  rows.push_back({"surogate grpo with iterations or a KL term over several processes", SupportStage::Device,
                  SupportBackend::Any,
                  [](const Config& c, const RunShape& s) {
                    return c.grpo.enabled && s.spans_processes() && (c.grpo.beta != 0.0 || c.grpo.num_iterations > 1);
                  },
                  [](const Config& c, const RunShape& s) {
                    const char* key = c.grpo.beta != 0.0 ? "grpo.beta" : "grpo.num_iterations";
                    return fmt::format("{}: option '{}' is not run by `surogate grpo` over several processes in this "
                                       "version: the importance ratio and the KL term read every rank's per-token "
                                       "log-probabilities in one process; a launcher or Ray started {} processes. "
                                       "Start one process with gpus: {}, or set grpo.beta: 0 and "
                                       "grpo.num_iterations: 1",
                                       c.sources.of(key), key, s.processes, s.world_size);
                  }});
}

}  // namespace surogate
