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
#include "train/objective/grpo_evaluation.h"
#include "train/objective/grpo_graph.h"
#include "train/objective/grpo_reference.h"
#include "train/objective/grpo_token_graph.h"
#include "train/objective/grpo_metrics.h"
#include "train/objective/grpo_process_rollouts.h"
#include "train/objective/grpo_rollout_model.h"
#include "train/objective/grpo_window.h"
#include "train/model_weights.h"
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

// The ratio or the KL term is in play: the step trains through grpo_iterations.h.
bool grpo_uses_iterations(const config::Grpo& grpo) { return grpo.beta != 0.0 || grpo.num_iterations > 1; }

}  // namespace

GrpoObjective::GrpoObjective(const Config& config) : config_(config) {}

GrpoObjective::~GrpoObjective() = default;

ObjectiveGraph GrpoObjective::rewrite_loss(graph::Graph forward, graph::TensorId loss, const graph::OpRegistry& registry,
                                           int64_t batch, int64_t sequence) const {
  graph::Graph scored = apply_grpo_temperature(std::move(forward), loss, config_.grpo.temperature);
  if (!grpo_uses_iterations(config_.grpo)) return {std::move(scored), loss};
  return apply_grpo_token_loss(std::move(scored), loss, registry, batch, sequence, config_.grpo.max_completion_length);
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
  // Read as the trainer holds them: the adapter live, the base bf16 or quantized (grpo_rollout_model.h).
  const generate::WeightForms forms = grpo_weight_forms(
      config_, models::load_model_config(model_dir, model_definition(config_.model, config_.sources)),
      context.lora != nullptr ? &context.lora->options : nullptr);
  generate::LoadedWeights weights{context.plan, nullptr, forms.lora, forms.qlora, forms.fp8};
  const int64_t completions = config_.schedule.per_device_train_batch_size *
                              std::max<int64_t>(1, config_.schedule.gradient_accumulation_steps);
  // The shape the training plan counted (grpo_rollout_model.h).
  const generate::ModelOptions options = grpo_rollout_model_options(config_, context.cuda);
  models_ = std::make_unique<GrpoRankModels>(*context.device, weights, model_dir, options, grpo_prefill_shape(config_));
  const int processes = context.world != nullptr ? context.world->size() : 1;
  SUROGATE_CHECK(models_->ranks() * processes == context.device->data_parallel_ranks(),
                 "a rollout model on each of the {} data-parallel ranks", context.device->data_parallel_ranks());
  // The iterations keep every rank's log-probabilities in one process (feature_support_grpo.cpp).
  SUROGATE_CHECK(processes == 1 || !grpo_uses_iterations(grpo), "GRPO iterations in one process");
  seeds_ = context.saved_state.is_object() && context.saved_state.contains("rollout_seeds")
               ? rl::RolloutSeeds::from_json(context.saved_state["rollout_seeds"], "trainer_state.json objective")
               : rl::RolloutSeeds(static_cast<uint64_t>(config_.data.train_seed));
  if (grpo_uses_iterations(grpo)) prepare_iterations(options, forms);
  context.message(fmt::format("surogate grpo: {} prompts, {} completions of each per group, {} per step, rewards: {}",
                              prompts_.rows.size(), grpo.num_generations, completions,
                              fmt::join(grpo.reward_functions, ", ")));
  if (options.slots < completions) {  // rollouts in waves
    const int64_t waves = (completions + options.slots - 1) / options.slots;
    context.message(fmt::format("rollouts: {} completions at once, {} waves a step{}", options.slots, waves,
                                grpo.generation_batch_size
                                    ? std::string()
                                    : "; `--dry-run` says whether a larger grpo.generation_batch_size fits"));
  }
}

void GrpoObjective::prepare_iterations(const generate::ModelOptions& options, const generate::WeightForms& forms) {
  const config::Grpo& grpo = config_.grpo;
  const int64_t accumulation = std::max<int64_t>(1, config_.schedule.gradient_accumulation_steps);
  GrpoIterationSettings settings;
  settings.num_iterations = grpo.num_iterations;
  settings.temperature = grpo.temperature;
  settings.batch = config_.schedule.per_device_train_batch_size;
  settings.width = grpo.max_completion_length;
  settings.train_seed = static_cast<uint64_t>(config_.data.train_seed);
  settings.loss = grpo_loss_options(grpo, accumulation);
  settings.lay_out = [this, accumulation](const GrpoGeneration& generation) {
    const config::Grpo& grpo = config_.grpo;
    GrpoLayout layout;
    layout.completions = rl::completion_batch(generation.completions, rollout_.eos_ids, prompts_.pad_id,
                                              grpo.mask_truncated_completions);
    layout.batches = grpo_window(generation.prompts, generation.completions, layout.completions, generation.advantages,
                                 grpo_loss_options(grpo, accumulation), config_.schedule.per_device_train_batch_size,
                                 grpo.max_prompt_length + grpo.max_completion_length, prompts_.pad_id)
                         .batches;
    return layout;
  };
  if (grpo.beta != 0.0 && context_.lora != nullptr) {
    // The reference is the base: the same weights read in place (quantized as the trainer holds
    // them) without the adapter.
    references_ = std::make_unique<GrpoRankModels>(
        *context_.device, generate::LoadedWeights{context_.plan, nullptr, std::nullopt, forms.qlora, forms.fp8},
        config_.model.name_or_path, options);
  } else if (grpo.beta != 0.0) {
    // Full fine-tuning: the reference is the starting model, as TRL's frozen copy. Each rank loads
    // the folder's weights again into a model of its own, which the optimizer never writes; after
    // a resume too, so the reference stays the starting weights, not the checkpoint's.
    if (!has_safetensors(config_.model.name_or_path)) {
      fail_user("{}: option 'grpo.beta' is {}: under full fine-tuning the KL reference is the starting model, read "
                "again from the model folder, and {} has no safetensors (the run initialises its weights from "
                "scratch). Point `model` at a folder with weights, use lora: true, or set beta: 0",
                config_.sources.of("grpo.beta"), grpo.beta, config_.model.name_or_path);
    }
    references_ = std::make_unique<GrpoRankModels>(*context_.device, config_.model.name_or_path, options);
    context_.message(fmt::format("surogate grpo: the KL reference is a frozen copy of the starting weights ({}) on "
                                 "each of {} rank(s)",
                                 config_.model.name_or_path, references_->ranks()));
  }
  if (references_) {
    settings.reference = [this](const GrpoGeneration& generation) {
      return rank_reference_logps(*references_, generation, config_.schedule.per_device_train_batch_size,
                                  config_.grpo.max_completion_length, config_.grpo.temperature);
    };
  }
  const nlohmann::json& saved = context_.saved_state;
  iterations_ = std::make_unique<GrpoIterations>(
      context_, std::move(settings),
      saved.is_object() && saved.contains("grpo_iterations") ? saved["grpo_iterations"] : nlohmann::json());
}

void GrpoObjective::begin_window(std::span<const data::PackedBatch>, double loss_scale) {
  if (iterations_) iterations_->begin_window(loss_scale);
}

std::vector<runtime::InputBinding> GrpoObjective::bind(size_t micro) {
  return iterations_ ? iterations_->bind(micro) : std::vector<runtime::InputBinding>{};
}

void GrpoObjective::observe(TrainingDevice& device) {
  if (iterations_) device.kept_outputs();  // the step's own log-probabilities: its passes before read them
}

void GrpoObjective::make_window(data::DataLoader& loader, std::span<data::PackedBatch> batches) {
  const config::Grpo& grpo = config_.grpo;
  const GrpoClock::time_point start = GrpoClock::now();
  const int64_t batch = config_.schedule.per_device_train_batch_size;
  // The whole window: every rank's micro-batches, of every process (`batches` takes this one's).
  const int all_ranks = context_.device->data_parallel_ranks();
  const int64_t window_size = std::max<int64_t>(1, config_.schedule.gradient_accumulation_steps) * all_ranks;
  const int64_t completions = window_size * batch;
  const int64_t prompt_count = completions / grpo.num_generations;
  if (iterations_ && iterations_->replays()) {  // the buffered generation again: no prompts read
    iterations_->replay(batches, metrics_);
    window_made_ = GrpoClock::now();
    return;
  }
  std::vector<const data::PromptRow*> rows;
  std::vector<std::vector<int32_t>> prompt_ids;
  for (int64_t p = 0; p < prompt_count; ++p) {
    const data::PackedBatch one = loader.next();  // batches of one prompt: no padding row
    rows.push_back(&prompts_.rows.at(static_cast<size_t>(one.rows.at(0))));
    prompt_ids.push_back(rows.back()->prompt_ids);
  }
  // Rollouts with the current weights, each rank its share of the prompts; over several processes
  // every process's then on every process (grpo_process_rollouts.h).
  generate::GenerationStats stats;
  const int first_rank = context_.world != nullptr ? context_.world->rank() * models_->ranks() : 0;
  std::vector<rl::Rollout> rollouts =
      models_->generate(prompt_ids, rollout_, seeds_, &*tokenizer_, &stats, first_rank, all_ranks);
  if (context_.world != nullptr) rollouts = gather_process_rollouts(*context_.world, std::move(rollouts), stats);
  const double generation_seconds = grpo_seconds(start);
  const GrpoClock::time_point reward_start = GrpoClock::now();
  std::vector<std::vector<int32_t>> completion_ids, completion_prompts;
  for (const rl::Rollout& rollout : rollouts) {
    completion_ids.push_back(rollout.completion_ids);
    completion_prompts.push_back(rows.at(rollout.prompt)->prompt_ids);
  }
  const rl::GroupAdvantages advantages = score_rollouts(rows, rollouts, *rewards_, grpo);
  // The step's completions in window order: each rank's micro-batches hold the ones it sampled.
  const std::vector<size_t> order = grpo_window_order(all_ranks, window_size / all_ranks, batch);
  completion_ids = in_window_order(completion_ids, order);
  completion_prompts = in_window_order(completion_prompts, order);
  const std::vector<double> window_advantages = in_window_order(advantages.advantages, order);
  const rl::CompletionBatch laid_out =
      rl::completion_batch(completion_ids, rollout_.eos_ids, prompts_.pad_id, grpo.mask_truncated_completions);
  GrpoWindow window = grpo_window(completion_prompts, completion_ids, laid_out, window_advantages,
                                  grpo_loss_options(grpo, window_size), batch,
                                  grpo.max_prompt_length + grpo.max_completion_length, prompts_.pad_id);
  size_t taken = 0;  // this process's micro-batches, in window order (the step loop's)
  for (int64_t index = 0; index < window_size; ++index) {
    if (!context_.device->takes_micro_batch(index)) continue;
    SUROGATE_CHECK(taken < batches.size(), "{} micro-batches of the window for this process", batches.size());
    batches[taken++] = std::move(window.batches[static_cast<size_t>(index)]);
  }
  SUROGATE_CHECK(taken == batches.size(), "{} micro-batches of the window for this process, not {}", taken,
                 batches.size());

  nlohmann::json metrics{{"loss", window.loss},
                         {"clip_ratio/low_mean", window.metrics.clip_low_mean},
                         {"clip_ratio/high_mean", window.metrics.clip_high_mean},
                         {"clip_ratio/region_mean", window.metrics.clip_region_mean},
                         {"num_tokens", laid_out.masked_tokens()},
                         {"generation_seconds", generation_seconds},
                         {"reward_seconds", grpo_seconds(reward_start)},
                         {"generated_tokens", stats.generated_tokens},
                         {"prompt_tokens", stats.prompt_tokens},
                         {"shared_prompt_tokens", stats.shared_prompt_tokens}};
  add_reward_metrics(advantages, rewards_->specs(), metrics);
  add_length_metrics(rollouts, metrics);
  const data::LoaderPosition position = loader.position();
  metrics["epoch"] = static_cast<double>(position.epoch) +
                     static_cast<double>(position.index) / static_cast<double>(std::max<size_t>(prompts_.rows.size(), 1));
  null_non_finite(metrics);
  metrics_ = std::move(metrics);
  if (iterations_) iterations_->start({completion_prompts, completion_ids, window_advantages, {}, {}, {}}, batches, metrics_);
  if (grpo.log_completions && context_.log) log_rollouts(context_.log, grpo, rows, rollouts, advantages, {});
  window_made_ = GrpoClock::now();
}

nlohmann::json GrpoObjective::step_metrics() {
  nlohmann::json metrics = std::move(metrics_);
  metrics_ = nlohmann::json::object();
  if (metrics.is_object()) metrics["training_seconds"] = grpo_seconds(window_made_);
  return metrics;
}

nlohmann::json GrpoObjective::evaluate() {
  nlohmann::json result;
  models_->on_first([&](generate::NextTokenModel& model) {  // on the first rank's thread
    result = evaluate_grpo({&model, &*tokenizer_, rewards_.get(), &rollout_, &config_, prompts_.pad_id, context_.log},
                           prompts_.eval_rows);
  });
  return result;
}

nlohmann::json GrpoObjective::checkpoint_state() const {
  nlohmann::json state{{"rollout_seeds", seeds_.to_json()}};
  if (iterations_) state["grpo_iterations"] = iterations_->checkpoint_state();
  return state;
}

}  // namespace surogate::train
