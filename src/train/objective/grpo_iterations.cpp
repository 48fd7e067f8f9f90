// GRPO's iterations over a generation batch, with the ratio and the KL term; see grpo_iterations.h.
#include "train/objective/grpo_iterations.h"

#include <algorithm>

#include "core/dropout_rate.h"
#include "core/error.h"
#include "data/sample.h"
#include "models/lora.h"
#include "train/batch_inputs.h"
#include "train/device/training_device.h"
#include "train/objective/grpo_token_graph.h"

namespace surogate::train {
namespace {

std::vector<double> json_doubles(const nlohmann::json& json, const char* key) {
  return json.contains(key) ? json.at(key).get<std::vector<double>>() : std::vector<double>{};
}

// grpo_token_graph.h's token ids of one micro-batch: the position predicting completion token t of
// row r (its prompt's length + t − 1) holds r·width + t where the token is in the loss.
std::vector<int32_t> micro_token_ids(const GrpoGeneration& generation, const GrpoLayout& layout, int64_t micro,
                                     int64_t batch, int64_t width) {
  const data::PackedBatch& packed = layout.batches.at(static_cast<size_t>(micro));
  const int64_t sequence = packed.sequence_length, T = layout.completions.tokens;
  std::vector<int32_t> ids(static_cast<size_t>(batch * sequence), -1);
  for (int64_t r = 0; r < batch; ++r) {
    const int64_t b = micro * batch + r;
    const auto prompt = static_cast<int64_t>(generation.prompts[static_cast<size_t>(b)].size());
    const auto length = static_cast<int64_t>(generation.completions[static_cast<size_t>(b)].size());
    for (int64_t t = 0; t < length; ++t) {
      if (layout.completions.mask[static_cast<size_t>(b * T + t)] <= 0.0f) continue;
      const int64_t at = r * sequence + prompt + t;
      SUROGATE_CHECK(prompt > 0 && t < width && packed.labels[static_cast<size_t>(at)] != data::kIgnoreLabel,
                     "a GRPO completion token {} of row {} labelled in its micro-batch", t, b);
      ids[static_cast<size_t>(at - 1)] = static_cast<int32_t>(r * width + t);
    }
  }
  return ids;
}

}  // namespace

nlohmann::json GrpoGeneration::to_json() const {
  return {{"prompts", prompts}, {"completions", completions}, {"advantages", advantages},
          {"old_logps", old_logps}, {"ref_logps", ref_logps}, {"metrics", metrics}};
}

GrpoGeneration GrpoGeneration::from_json(const nlohmann::json& json) {
  GrpoGeneration generation;
  generation.prompts = json.at("prompts").get<std::vector<std::vector<int32_t>>>();
  generation.completions = json.at("completions").get<std::vector<std::vector<int32_t>>>();
  generation.advantages = json_doubles(json, "advantages");
  generation.old_logps = json_doubles(json, "old_logps");
  generation.ref_logps = json_doubles(json, "ref_logps");
  generation.metrics = json.value("metrics", nlohmann::json::object());
  return generation;
}

GrpoIterations::GrpoIterations(const ObjectiveContext& context, GrpoIterationSettings settings,
                               const nlohmann::json& saved)
    : context_(context), settings_(std::move(settings)) {
  const compiler::ExecutionPlan& plan = *context.plan;
  token_ids_tensor_ = plan.tensor(kGrpoTokenIds);
  coefficients_tensor_ = plan.tensor(kGrpoTokenCoefficients);
  if (auto seed = plan.graph.find_tensor(models::kDropoutSeed)) dropout_seed_tensor_ = *seed;
  context.device->keep_outputs({plan.tensor(kGrpoTokenLogps)});
  zeros_.assign(static_cast<size_t>(settings_.batch * settings_.width), 0.0f);
  if (!saved.is_object()) return;
  windows_ = saved.value("windows", int64_t{0});
  iteration_ = saved.value("iteration", int64_t{0});
  if (iteration_ > 0 && saved.contains("generation")) {
    generation_ = GrpoGeneration::from_json(saved.at("generation"));
    layout_ = settings_.lay_out(*generation_);
    token_ids_.clear();
    for (int64_t micro = 0; micro < static_cast<int64_t>(layout_.batches.size()); ++micro) {
      token_ids_.push_back(micro_token_ids(*generation_, layout_, micro, settings_.batch, settings_.width));
    }
  }
}

nlohmann::json GrpoIterations::checkpoint_state() const {
  nlohmann::json state{{"windows", windows_}, {"iteration", iteration_}};
  if (replays()) state["generation"] = generation_->to_json();
  return state;
}

std::vector<double> GrpoIterations::policy_logps(std::optional<int64_t> dropout_step) {
  const int64_t W = settings_.width, batch = settings_.batch;
  const auto micro_batches = static_cast<int64_t>(layout_.batches.size());
  std::vector<double> logps(static_cast<size_t>(micro_batches * batch * W), 0.0);
  bool trained = false;
  std::vector<int32_t> seeds(static_cast<size_t>(micro_batches));
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    std::vector<runtime::InputBinding> bindings = context_.inputs->bind(layout_.batches[static_cast<size_t>(micro)], 0.0f);
    bindings.push_back({token_ids_tensor_, std::as_bytes(std::span<const int32_t>(token_ids_[static_cast<size_t>(micro)]))});
    bindings.push_back({coefficients_tensor_, std::as_bytes(std::span<const float>(zeros_))});
    if (dropout_seed_tensor_ != graph::kNoTensor) {
      int32_t& seed = seeds[static_cast<size_t>(micro)];
      seed = dropout_step ? dropout_seed(settings_.train_seed, *dropout_step, micro) : kDropoutOffSeed;
      bindings.push_back({dropout_seed_tensor_, std::as_bytes(std::span<const int32_t>(&seed, 1))});
    }
    // The forward only where the device offers it; else the plan with zero coefficients (no
    // gradient), its outputs read after measure() and the step skipped, as the DPO reference pass.
    if (!context_.device->forward_only(bindings)) {
      context_.device->accumulate(bindings);
      trained = true;
    }
  }
  if (trained) context_.device->measure();
  const std::vector<KeptOutputs> kept = context_.device->kept_outputs();
  SUROGATE_CHECK(static_cast<int64_t>(kept.size()) == micro_batches, "the kept token log-probs of every micro-batch");
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    const std::vector<float>& values = kept[static_cast<size_t>(micro)].at(0);
    SUROGATE_CHECK(static_cast<int64_t>(values.size()) == batch * W, "the token log-probs of a micro-batch");
    std::copy(values.begin(), values.end(), logps.begin() + micro * batch * W);
  }
  if (trained) context_.device->skip_update();
  return logps;
}

void GrpoIterations::start(GrpoGeneration generation, std::span<data::PackedBatch> batches, nlohmann::json& metrics) {
  generation_ = std::move(generation);
  layout_ = settings_.lay_out(*generation_);
  SUROGATE_CHECK(layout_.batches.size() == batches.size(), "a GRPO generation of {} micro-batches", batches.size());
  token_ids_.clear();
  for (int64_t micro = 0; micro < static_cast<int64_t>(batches.size()); ++micro) {
    token_ids_.push_back(micro_token_ids(*generation_, layout_, micro, settings_.batch, settings_.width));
  }
  if (settings_.num_iterations > 1) generation_->old_logps = policy_logps(std::nullopt);
  if (settings_.reference) generation_->ref_logps = settings_.reference(*generation_);
  generation_->metrics = metrics;
  iteration_ = 0;
  train_window(batches, metrics);
}

void GrpoIterations::replay(std::span<data::PackedBatch> batches, nlohmann::json& metrics) {
  SUROGATE_CHECK(replays(), "a buffered GRPO generation to train again");
  metrics = generation_->metrics;
  metrics["generation_seconds"] = 0.0;  // no rollouts for this step: the generation's own step had them
  metrics["reward_seconds"] = 0.0;
  train_window(batches, metrics);
}

// The step's loss, metrics and coefficients from the policy's log-probabilities at its weights.
void GrpoIterations::train_window(std::span<data::PackedBatch> batches, nlohmann::json& metrics) {
  const GrpoGeneration& generation = *generation_;
  const int64_t W = settings_.width, batch = settings_.batch, T = layout_.completions.tokens;
  const auto micro_batches = static_cast<int64_t>(batches.size());
  // At the generation's first iteration the weights are the old policy's: without dropout the
  // pass would repeat the old one bit for bit.
  const bool same_as_old = iteration_ == 0 && !generation.old_logps.empty() && dropout_seed_tensor_ == graph::kNoTensor;
  const std::vector<double> logps = same_as_old ? generation.old_logps : policy_logps(windows_);
  ops::GrpoLossOptions options = settings_.loss;
  options.accumulation_steps = static_cast<double>(micro_batches);
  options.token_normalizer = static_cast<double>(std::max<int64_t>(layout_.completions.masked_tokens(), 1));
  double loss = 0.0;
  ops::GrpoLossMetrics mean;
  coefficients_.assign(static_cast<size_t>(micro_batches), std::vector<double>(static_cast<size_t>(batch * W), 0.0));
  std::vector<double> mask(static_cast<size_t>(batch * W));
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    const int64_t first = micro * batch;
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t t = 0; t < W; ++t) {
        mask[static_cast<size_t>(r * W + t)] = t < T ? layout_.completions.mask[static_cast<size_t>((first + r) * T + t)] : 0.0;
      }
    }
    const size_t at = static_cast<size_t>(first * W);
    const ops::GrpoLossInputs<double> inputs{logps.data() + at,
                                             generation.old_logps.empty() ? nullptr : generation.old_logps.data() + at,
                                             generation.ref_logps.empty() ? nullptr : generation.ref_logps.data() + at,
                                             generation.advantages.data() + first, mask.data()};
    const ops::GrpoLossShape shape{batch, W};
    const ops::GrpoLossResult result = ops::grpo_loss_forward(shape, options, inputs);
    ops::grpo_loss_backward(shape, options, inputs, 1.0, coefficients_[static_cast<size_t>(micro)].data());
    loss += result.loss;
    const double share = 1.0 / static_cast<double>(micro_batches);
    mean.kl += share * result.metrics.kl;
    mean.clip_low_mean += share * result.metrics.clip_low_mean;
    mean.clip_high_mean += share * result.metrics.clip_high_mean;
    mean.clip_region_mean += share * result.metrics.clip_region_mean;
  }
  metrics["loss"] = loss;
  if (options.beta != 0.0) metrics["kl"] = mean.kl;
  metrics["clip_ratio/low_mean"] = mean.clip_low_mean;
  metrics["clip_ratio/high_mean"] = mean.clip_high_mean;
  metrics["clip_ratio/region_mean"] = mean.clip_region_mean;
  for (int64_t micro = 0; micro < micro_batches; ++micro) batches[static_cast<size_t>(micro)] = layout_.batches[static_cast<size_t>(micro)];
  ++windows_;
  iteration_ = (iteration_ + 1) % settings_.num_iterations;
}

void GrpoIterations::begin_window(double loss_scale) {
  bound_.assign(coefficients_.size(), {});
  for (size_t micro = 0; micro < coefficients_.size(); ++micro) {
    for (const double c : coefficients_[micro]) bound_[micro].push_back(static_cast<float>(c * loss_scale));
  }
}

std::vector<runtime::InputBinding> GrpoIterations::bind(size_t micro) const {
  return {{token_ids_tensor_, std::as_bytes(std::span<const int32_t>(token_ids_.at(micro)))},
          {coefficients_tensor_, std::as_bytes(std::span<const float>(bound_.at(micro)))}};
}

}  // namespace surogate::train
