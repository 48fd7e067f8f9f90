// The GRPO objective; see grpo_objective.h.
#include "train/objective/grpo_objective.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "generate/generation_defaults.h"
#include "generate/kv_cache_model.h"
#include "models/defined_weights.h"
#include "rl/advantages.h"
#include "rl/completion_batch.h"
#include "train/device/training_device.h"
#include "train/objective/grpo_graph.h"
#include "train/objective/grpo_rollout_model.h"
#include "train/objective/grpo_window.h"
#include "train/training_plan.h"

namespace surogate::train {
namespace {

using GrpoClock = std::chrono::steady_clock;

double grpo_seconds(GrpoClock::time_point start) {
  return std::chrono::duration<double>(GrpoClock::now() - start).count();
}

ops::GrpoLossOptions grpo_loss_options(const config::Grpo& grpo, int64_t accumulation) {
  ops::GrpoLossOptions options;
  options.loss_type = grpo.loss_type == "grpo"      ? ops::GrpoLossType::Grpo
                      : grpo.loss_type == "bnpo"    ? ops::GrpoLossType::Bnpo
                      : grpo.loss_type == "dr_grpo" ? ops::GrpoLossType::DrGrpo
                                                    : ops::GrpoLossType::Dapo;
  options.epsilon_low = grpo.epsilon;
  options.epsilon_high = grpo.epsilon_high.value_or(grpo.epsilon);
  options.beta = grpo.beta;
  options.max_completion_length = grpo.max_completion_length;
  options.accumulation_steps = static_cast<double>(accumulation);
  return options;
}

// TRL's completions/* metrics: lengths of all completions, and of those that ended (an EOS).
void add_length_metrics(const std::vector<rl::Rollout>& rollouts, nlohmann::json& metrics) {
  double sum = 0.0, terminated_sum = 0.0;
  int64_t least = INT64_MAX, most = 0, terminated = 0;
  for (const rl::Rollout& rollout : rollouts) {
    const auto length = static_cast<int64_t>(rollout.completion_ids.size());
    sum += static_cast<double>(length);
    least = std::min(least, length);
    most = std::max(most, length);
    if (rollout.finish_reason == "stop") {
      terminated_sum += static_cast<double>(length);
      ++terminated;
    }
  }
  const double count = static_cast<double>(std::max<size_t>(rollouts.size(), 1));
  metrics["completions/mean_length"] = sum / count;
  metrics["completions/min_length"] = rollouts.empty() ? 0 : least;
  metrics["completions/max_length"] = most;
  metrics["completions/clipped_ratio"] = 1.0 - static_cast<double>(terminated) / count;
  metrics["completions/mean_terminated_length"] = terminated > 0 ? terminated_sum / static_cast<double>(terminated) : 0.0;
}

}  // namespace

GrpoObjective::GrpoObjective(const Config& config) : config_(config) {}

GrpoObjective::~GrpoObjective() = default;

ObjectiveGraph GrpoObjective::rewrite_loss(graph::Graph forward, graph::TensorId loss, const graph::OpRegistry&,
                                           int64_t, int64_t) const {
  return {apply_grpo_temperature(std::move(forward), loss, config_.grpo.temperature), loss};
}

void GrpoObjective::prepare(const ObjectiveContext& context) {
  context_ = context;
  const config::Grpo& grpo = config_.grpo;
  prompts_ = read_prompt_rows(config_);
  const std::filesystem::path model_dir = config_.model.name_or_path;
  tokenizer_ = tokenizer::Tokenizer::load(model_dir);
  rollout_.num_generations = grpo.num_generations;
  rollout_.max_completion_length = grpo.max_completion_length;
  rollout_.sampling = {.do_sample = true, .temperature = grpo.temperature, .top_k = grpo.top_k, .top_p = grpo.top_p};
  rollout_.eos_ids = generate::read_generation_defaults(model_dir).eos_token_ids;
  if (rollout_.eos_ids.empty() && tokenizer_->eos_token_id()) rollout_.eos_ids = {*tokenizer_->eos_token_id()};
  // Loaded before the first rollout: a missing file or function stops the run now.
  rewards_ = std::make_unique<rl::RewardFunctions>(grpo.reward_functions, std::filesystem::path(grpo.config_dir));
  const runtime::Backend* backend = context.device->weights_backend();
  SUROGATE_CHECK(backend != nullptr, "surogate grpo runs on a device whose weights one backend holds");
  // Read as the trainer holds them: the adapter live, the base bf16 or quantized (grpo_rollout_model.h).
  const generate::WeightForms forms = grpo_weight_forms(
      config_, models::load_model_config(model_dir, model_definition(config_.model, config_.sources)),
      context.lora != nullptr ? &context.lora->options : nullptr);
  generate::LoadedWeights weights{context.plan, backend, forms.lora, forms.qlora, forms.fp8};
  const int64_t completions = config_.schedule.per_device_train_batch_size *
                              std::max<int64_t>(1, config_.schedule.gradient_accumulation_steps);
  // The shape the training plan counted (grpo_rollout_model.h).
  model_ = generate::open_kv_cache_on_weights(weights, model_dir, grpo_rollout_model_options(config_, context.cuda));
  seeds_ = context.saved_state.is_object() && context.saved_state.contains("rollout_seeds")
               ? rl::RolloutSeeds::from_json(context.saved_state["rollout_seeds"], "trainer_state.json objective")
               : rl::RolloutSeeds(static_cast<uint64_t>(config_.data.train_seed));
  context.message(fmt::format("surogate grpo: {} prompts, {} completions of each per group, {} per step, rewards: {}",
                              prompts_.rows.size(), grpo.num_generations, completions,
                              fmt::join(grpo.reward_functions, ", ")));
}

void GrpoObjective::make_window(data::DataLoader& loader, std::span<data::PackedBatch> batches) {
  const config::Grpo& grpo = config_.grpo;
  const GrpoClock::time_point start = GrpoClock::now();
  const int64_t batch = config_.schedule.per_device_train_batch_size;
  const auto completions = static_cast<int64_t>(batches.size()) * batch;
  const int64_t prompt_count = completions / grpo.num_generations;
  std::vector<const data::PromptRow*> rows;
  std::vector<std::vector<int32_t>> prompt_ids;
  for (int64_t p = 0; p < prompt_count; ++p) {
    const data::PackedBatch one = loader.next();  // batches of one prompt: no padding row
    rows.push_back(&prompts_.rows.at(static_cast<size_t>(one.rows.at(0))));
    prompt_ids.push_back(rows.back()->prompt_ids);
  }
  // Rollouts with the current weights: every slot cleared (they hold the keys of older weights).
  for (int64_t slot = 0; slot < model_->slots(); ++slot) model_->clear(slot);
  generate::GenerationStats stats;
  const std::vector<rl::Rollout> rollouts =
      rl::generate_groups(*model_, prompt_ids, rollout_, seeds_, &*tokenizer_, &stats);
  const double generation_seconds = grpo_seconds(start);
  const GrpoClock::time_point reward_start = GrpoClock::now();
  rl::RewardBatch reward_batch;
  std::vector<std::vector<int32_t>> completion_ids, completion_prompts;
  for (const rl::Rollout& rollout : rollouts) {
    const data::PromptRow& row = *rows.at(rollout.prompt);
    reward_batch.add(row.prompt, row.columns, rollout.completion, rollout.completion_ids, row.origin.describe());
    completion_ids.push_back(rollout.completion_ids);
    completion_prompts.push_back(row.prompt_ids);
  }
  const std::vector<std::vector<double>> scores = rewards_->score(reward_batch);
  std::vector<double> weights = grpo.reward_weights;
  if (weights.empty()) weights.assign(scores.size(), 1.0);
  const rl::GroupAdvantages advantages =
      rl::group_advantages(scores, weights, grpo.num_generations, rl::parse_scale_rewards(grpo.scale_rewards));
  const rl::CompletionBatch laid_out =
      rl::completion_batch(completion_ids, rollout_.eos_ids, prompts_.pad_id, grpo.mask_truncated_completions);
  GrpoWindow window = grpo_window(completion_prompts, completion_ids, laid_out, advantages.advantages,
                                  grpo_loss_options(grpo, static_cast<int64_t>(batches.size())), batch,
                                  grpo.max_prompt_length + grpo.max_completion_length, prompts_.pad_id);
  for (size_t micro = 0; micro < batches.size(); ++micro) batches[micro] = std::move(window.batches[micro]);

  nlohmann::json metrics{{"loss", window.loss},
                         {"reward", advantages.reward.mean},
                         {"reward_std", advantages.reward.std},
                         {"frac_reward_zero_std", advantages.frac_reward_zero_std},
                         {"clip_ratio/low_mean", window.metrics.clip_low_mean},
                         {"clip_ratio/high_mean", window.metrics.clip_high_mean},
                         {"clip_ratio/region_mean", window.metrics.clip_region_mean},
                         {"num_tokens", laid_out.masked_tokens()},
                         {"generation_seconds", generation_seconds},
                         {"reward_seconds", grpo_seconds(reward_start)},
                         {"generated_tokens", stats.generated_tokens}};
  for (size_t f = 0; f < rewards_->specs().size(); ++f) {
    const std::string& name = rewards_->specs()[f].name;
    metrics[fmt::format("rewards/{}/mean", name)] = advantages.per_function[f].mean;
    metrics[fmt::format("rewards/{}/std", name)] = advantages.per_function[f].std;
  }
  add_length_metrics(rollouts, metrics);
  const data::LoaderPosition position = loader.position();
  metrics["epoch"] = static_cast<double>(position.epoch) +
                     static_cast<double>(position.index) / static_cast<double>(std::max<size_t>(prompts_.rows.size(), 1));
  // JSON has no NaN: a statistic of fewer than two values is null, as TRL's logs print nan.
  for (auto& [key, value] : metrics.items()) {
    if (value.is_number_float() && !std::isfinite(value.get<double>())) value = nullptr;
  }
  metrics_ = std::move(metrics);
  if (grpo.log_completions && context_.log) {
    const auto shown = std::min<size_t>(static_cast<size_t>(grpo.num_completions_to_print), rollouts.size());
    for (size_t i = 0; i < shown; ++i) {
      context_.log("completion", {{"step_completion", i}, {"prompt", rows.at(rollouts[i].prompt)->text},
                                  {"prompt_ids", rows.at(rollouts[i].prompt)->prompt_ids},
                                  {"completion", rollouts[i].completion}, {"completion_ids", rollouts[i].completion_ids},
                                  {"finish_reason", rollouts[i].finish_reason},
                                  {"reward", std::isfinite(advantages.rewards[i]) ? nlohmann::json(advantages.rewards[i])
                                                                                  : nlohmann::json()},
                                  {"advantage", advantages.advantages[i]}});
    }
  }
  window_made_ = GrpoClock::now();
}

nlohmann::json GrpoObjective::step_metrics() {
  nlohmann::json metrics = std::move(metrics_);
  metrics_ = nlohmann::json::object();
  if (metrics.is_object()) metrics["training_seconds"] = grpo_seconds(window_made_);
  return metrics;
}

nlohmann::json GrpoObjective::checkpoint_state() const { return {{"rollout_seeds", seeds_.to_json()}}; }

}  // namespace surogate::train
