// The preference objective; see preference_objective.h.
#include "train/objective/preference_objective.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "core/dropout_rate.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "models/lora.h"
#include "data/prompt_sharing.h"
#include "train/device/fp8_state.h"
#include "train/device/training_device.h"
#include "train/objective/preference_graph.h"
#include "train/objective/prompt_sharing_graph.h"
#include "train/objective/process_window_rows.h"

namespace surogate::train {
namespace {

template <typename T>
std::span<const std::byte> preference_bytes(const std::vector<T>& values) {
  return std::as_bytes(std::span<const T>(values));
}

// The stored reference of this token cache and model, or nothing (missing, or another key).
bool read_reference(const std::filesystem::path& file, const nlohmann::json& key, ReferenceLogps& train,
                    ReferenceLogps& eval) {
  std::ifstream in(file);
  if (!in) return false;
  const nlohmann::json stored = nlohmann::json::parse(in, nullptr, false);
  if (!stored.is_object() || stored.value("key", nlohmann::json()) != key) return false;
  train = stored.at("train").get<ReferenceLogps>();
  eval = stored.at("eval").get<ReferenceLogps>();
  return true;
}

}  // namespace

ops::PreferenceLossOptions preference_loss_options(const config::Loss& loss) {
  ops::PreferenceLossType type = ops::PreferenceLossType::Dpo;
  SUROGATE_CHECK(ops::parse_preference_loss_type(loss.type, type), "loss.type validated");
  return {.type = type, .beta = loss.dpo_beta, .label_smoothing = loss.label_smoothing,
          .length_norm = loss.length_norm, .reference_free = loss.reference_free,
          .target_margin = loss.target_margin, .simpo_gamma = loss.simpo_gamma, .orpo_beta = loss.beta,
          .desirable_weight = loss.desirable_weight, .undesirable_weight = loss.undesirable_weight};
}

PreferenceObjective::PreferenceObjective(const config::Loss& loss, std::filesystem::path reference_file, std::string model,
                                         int64_t packed_length)
    : options_(preference_loss_options(loss)),
      share_prompts_(loss.share_prompts),
      packed_length_(packed_length),
      reference_file_(std::move(reference_file)),
      model_(std::move(model)),
      metrics_(options_) {}

ObjectiveGraph PreferenceObjective::rewrite_loss(graph::Graph forward, graph::TensorId loss,
                                                 const graph::OpRegistry& registry, int64_t batch,
                                                 int64_t sequence) const {
  ObjectiveGraph result = apply_preference_loss(std::move(forward), loss, registry, options_, batch, sequence);
  if (share_prompts_) result.graph = apply_prompt_sharing(result.graph, registry, batch, sequence, packed_length_);
  return result;
}

data::PackedBatch PreferenceObjective::plan_batch(data::PackedBatch packed) const {
  if (!share_prompts_) return packed;
  const graph::Shape& shape = context_.plan->graph.tensor(context_.plan->tensor(kSharedTakeIndex)).type.shape;
  return data::share_prompts(packed, shape[1], context_.pad_id);
}

std::vector<runtime::InputBinding> PreferenceObjective::bindings_of(const PairInputs& inputs) {
  const compiler::ExecutionPlan& plan = *context_.plan;
  std::vector<runtime::InputBinding> bindings{
      {plan.tensor(kSequenceIds), preference_bytes(inputs.sequence_ids)},
      {plan.tensor(kReferenceLogps), preference_bytes(inputs.reference)},
      {plan.tensor(kSequenceLengths), preference_bytes(inputs.lengths)},
      {plan.tensor(kPreferenceLabels), preference_bytes(inputs.labels)},
      {plan.tensor(kPreferenceScales), std::as_bytes(std::span<const float>(scales_, 2))}};
  if (share_prompts_) {
    const data::SharedPromptLayout* layout = inputs.shared_prompts;
    SUROGATE_CHECK(layout != nullptr && layout->expanded_length == packed_length_, "a batch in the shared layout");
    bindings.insert(bindings.end(), {{plan.tensor(kExpandedDocumentIds), preference_bytes(layout->expanded_document_ids)},
                                     {plan.tensor(kSharedExpandIndex), preference_bytes(layout->expand_index)},
                                     {plan.tensor(kSharedExpandSources), preference_bytes(layout->expand_sources)},
                                     {plan.tensor(kSharedTakeIndex), preference_bytes(layout->take_index)},
                                     {plan.tensor(kSharedTakeSources), preference_bytes(layout->take_sources)}});
  }
  return bindings;
}

std::vector<int64_t> PreferenceObjective::taken_indices(size_t count) const {
  std::vector<int64_t> indices;
  for (int64_t index = 0; indices.size() < count; ++index) {
    if (context_.device->takes_micro_batch(index)) indices.push_back(index);
  }
  return indices;
}

// The row: B, then the packed rows' pair indices [B] (−1 past the batch's rows), the policy's log-probs [2B] and logit sums
// [2B], the reference [2B], the lengths [2B], the labels [B].
std::vector<double> PreferenceObjective::policy_row(const PairInputs& inputs, const KeptOutputs& outputs,
                                                    const data::PackedBatch* batch) const {
  SUROGATE_CHECK(outputs.size() == 2, "the policy's log-probs and logit sums of a micro-batch");
  const auto rows = static_cast<size_t>(inputs.batch);
  std::vector<double> row{static_cast<double>(inputs.batch)};
  for (size_t r = 0; r < rows; ++r) {  // −1: no pair (a padding row)
    row.push_back(batch != nullptr && r < batch->rows.size() ? static_cast<double>(batch->rows[r]) : -1.0);
  }
  for (const std::vector<float>* part : {&outputs[0], &outputs[1], &inputs.reference, &inputs.lengths}) {
    SUROGATE_CHECK(part->size() == 2 * rows, "[2B] values of a micro-batch");
    row.insert(row.end(), part->begin(), part->end());
  }
  SUROGATE_CHECK(inputs.labels.size() == rows, "[B] labels of a micro-batch");
  row.insert(row.end(), inputs.labels.begin(), inputs.labels.end());
  return row;
}

void PreferenceObjective::read_policy(const std::vector<double>& row, PreferenceMetrics& metrics,
                                      ReferenceLogps* logps) const {
  const auto rows = static_cast<size_t>(row.at(0));
  SUROGATE_CHECK(row.size() == 1 + 10 * rows, "a policy row of {} pairs", rows);
  auto floats = [&](size_t from, size_t count) {  // the row's doubles hold floats exactly
    return std::vector<float>(row.begin() + static_cast<std::ptrdiff_t>(from),
                              row.begin() + static_cast<std::ptrdiff_t>(from + count));
  };
  const std::vector<float> policy = floats(1 + rows, 2 * rows), logit_sums = floats(1 + 3 * rows, 2 * rows),
                           reference = floats(1 + 5 * rows, 2 * rows), lengths = floats(1 + 7 * rows, 2 * rows),
                           labels = floats(1 + 9 * rows, rows);
  metrics.add(static_cast<int64_t>(rows), policy.data(), logit_sums.data(), reference.data(), lengths.data(),
              labels.data());
  if (logps == nullptr) return;
  for (size_t r = 0; r < rows; ++r) {
    if (row[1 + r] < 0.0) continue;  // a padding row
    const auto pair = static_cast<uint64_t>(row[1 + r]);
    if (2 * pair + 1 >= logps->size()) continue;  // a padding row
    (*logps)[2 * pair] = policy[r];
    (*logps)[2 * pair + 1] = policy[rows + r];
  }
}

void PreferenceObjective::read_window(const std::vector<std::pair<int64_t, std::vector<double>>>& mine,
                                      PreferenceMetrics& metrics, ReferenceLogps* logps) const {
  for (const std::vector<double>& row : window_rows(context_.world, mine)) read_policy(row, metrics, logps);
}

const std::string* PreferenceObjective::kto_labels(bool train) const {
  if (options_.type != ops::PreferenceLossType::Kto) return nullptr;
  return train ? &train_labels_ : &eval_labels_;
}

// One micro-batch per data-parallel rank between two measure() calls (rows past the end are
// padding), so that every rank runs one; each pair's values do not depend on the rank it ran on.
ReferenceLogps PreferenceObjective::forward_split(const data::PackedRowsView& rows, const ReferenceLogps* reference,
                                                  PreferenceMetrics* metrics, const std::string* kto_labels) {
  ReferenceLogps logps(2 * rows.rows(), 0.0f);
  PreferenceMetrics discarded(options_);
  scales_[0] = scales_[1] = 0.0f;  // no loss, no gradient: only the forward's log-probs are read
  const auto batch = static_cast<uint64_t>(context_.batch);
  const uint64_t group = batch * static_cast<uint64_t>(std::max(1, context_.device->data_parallel_ranks()));
  for (uint64_t first = 0; first < rows.rows(); first += group) {
    std::vector<data::PackedBatch> packed;
    packed.reserve(static_cast<size_t>(group / batch));  // inputs keep pointers to their batch's sharing tables
    std::vector<PairInputs> inputs;
    std::vector<int64_t> places;  // each micro-batch's place in the group (the window of one per rank)
    bool trained = false;
    for (uint64_t start = first; start < first + group; start += batch) {
      const auto place = static_cast<int64_t>((start - first) / batch);
      if (!context_.device->takes_micro_batch(place)) continue;  // another process's rank runs it
      places.push_back(place);
      std::vector<uint64_t> indices;
      for (uint64_t row = start; row < start + batch; ++row) indices.push_back(std::min<uint64_t>(row, rows.rows()));
      packed.push_back(plan_batch(data::make_batch(rows, indices, context_.pad_id)));
      inputs.push_back(pair_inputs(packed.back(), reference, kto_labels));
      std::vector<runtime::InputBinding> bindings = context_.inputs->bind(packed.back(), 0.0f);
      for (const runtime::InputBinding& binding : bindings_of(inputs.back())) bindings.push_back(binding);
      // The model as it is: LoRA dropout off (the reference pass and evaluation, as PEFT's eval mode).
      static constexpr int32_t kOff = kDropoutOffSeed;
      if (auto seed = context_.plan->graph.find_tensor(models::kDropoutSeed)) {
        bindings.push_back({*seed, std::as_bytes(std::span<const int32_t>(&kOff, 1))});
      }
      // The forward only where the device offers it (one rank); else the training plan with a zero
      // loss scale, its outputs read after measure().
      if (!context_.device->forward_only(bindings)) {
        context_.device->accumulate(bindings);
        trained = true;
      }
    }
    if (trained) context_.device->measure();
    const std::vector<KeptOutputs> kept = context_.device->kept_outputs();
    SUROGATE_CHECK(kept.size() == packed.size(), "the kept outputs of every micro-batch");
    std::vector<std::pair<int64_t, std::vector<double>>> mine;
    for (size_t micro = 0; micro < packed.size(); ++micro) {
      mine.emplace_back(places[micro], policy_row(inputs[micro], kept[micro], &packed[micro]));
    }
    read_window(mine, metrics != nullptr ? *metrics : discarded, &logps);
    if (trained) context_.device->skip_update();
  }
  return logps;
}

void PreferenceObjective::prepare(const ObjectiveContext& context) {
  context_ = context;
  context.device->keep_outputs({context.plan->tensor(kPolicyLogps), context.plan->tensor(kPolicyLogitSums)});
  if (options_.type == ops::PreferenceLossType::Kto) {
    const nlohmann::json labels = context.cache->report().value("kto_labels", nlohmann::json::object());
    train_labels_ = labels.value("train", std::string());
    eval_labels_ = labels.value("eval", std::string());
    if (train_labels_.size() != context.cache->train().rows() || eval_labels_.size() != context.cache->eval().rows()) {
      fail_user("loss.type kto: the datasets must be type: kto ({{prompt, completion, label}} rows)");
    }
  }
  if (!ops::preference_loss_uses_reference(options_)) return;
  const bool fp8 = fp8_state(*context.plan).has_value();
  // A fresh fp8_hybrid run calibrates first, whether it reads the reference or computes it: the
  // stored values were computed at the scales the calibration gives (the same data and weights).
  if (fp8 && !context.resumed) calibrate_fp8_scaling();
  nlohmann::json key{{"token_cache", context.cache->key()}, {"model", model_}};
  if (fp8) key["recipe"] = "fp8_hybrid";  // its values carry FP8's rounding (bf16 runs keep the older key)
  if (read_reference(reference_file_, key, train_reference_, eval_reference_) &&
      train_reference_.size() == 2 * context.cache->train().rows() &&
      eval_reference_.size() == 2 * context.cache->eval().rows()) {
    context.message(fmt::format("reference log-probabilities: read from {}", reference_file_.string()));
    return;
  }
  if (context.resumed) {
    fail_user("{}: the reference log-probabilities of this run are missing (or belong to other data or another model); "
              "a resumed `surogate dpo` run cannot recompute them from trained weights. Start the run again without "
              "resuming", reference_file_.string());
  }
  context.message(fmt::format("reference log-probabilities: computing them for {} + {} pairs with the starting weights",
                              context.cache->train().rows(), context.cache->eval().rows()));
  train_reference_ = forward_split(context.cache->train(), nullptr, nullptr, kto_labels(true));
  eval_reference_ = forward_split(context.cache->eval(), nullptr, nullptr, kto_labels(false));
  const nlohmann::json stored{{"key", key}, {"train", train_reference_}, {"eval", eval_reference_}};
  io::write_text_file_atomically(reference_file_, stored.dump());
}

void PreferenceObjective::calibrate_fp8_scaling() {
  const data::PackedRowsView pairs = data::first_rows(context_.cache->train(), kFp8CalibrationPairs);
  context_.message(fmt::format("fp8_hybrid: the FP8 scales from a forward over {} training pairs, shared by the "
                               "reference pass and the first steps", pairs.rows()));
  context_.device->keep_fp8_amaxes(true);
  forward_split(pairs, nullptr, nullptr, kto_labels(true));
  context_.device->keep_fp8_amaxes(false);
  context_.device->calibrate_fp8_scaling();
}

void PreferenceObjective::begin_window(std::span<const data::PackedBatch> window, double loss_scale) {
  window_.clear();
  // The whole window's pairs and chosen tokens: every process's micro-batches, in window order.
  std::vector<std::pair<int64_t, std::vector<double>>> counts;
  const std::vector<int64_t> indices = taken_indices(window.size());
  for (const data::PackedBatch& batch : window) {
    window_.push_back(pair_inputs(batch, ops::preference_loss_uses_reference(options_) ? &train_reference_ : nullptr,
                                  kto_labels(true)));
    counts.emplace_back(indices.at(counts.size()),
                        std::vector<double>{static_cast<double>(window_.back().pairs), window_.back().chosen_tokens});
  }
  int64_t pairs = 0;
  double chosen_tokens = 0.0;
  for (const std::vector<double>& row : window_rows(context_.world, counts)) {
    pairs += static_cast<int64_t>(row[0]);
    chosen_tokens += row[1];
  }
  scales_[0] = pairs > 0 ? static_cast<float>(loss_scale / static_cast<double>(pairs)) : 0.0f;
  scales_[1] = chosen_tokens > 0.0 ? static_cast<float>(loss_scale / chosen_tokens) : 0.0f;
}

std::vector<runtime::InputBinding> PreferenceObjective::bind(size_t micro) { return bindings_of(window_.at(micro)); }

void PreferenceObjective::observe(TrainingDevice& device) {
  const std::vector<KeptOutputs> kept = device.kept_outputs();
  SUROGATE_CHECK(kept.size() == window_.size(), "the kept outputs of every micro-batch of the window");
  std::vector<std::pair<int64_t, std::vector<double>>> mine;
  const std::vector<int64_t> indices = taken_indices(window_.size());
  for (size_t micro = 0; micro < window_.size(); ++micro) {
    mine.emplace_back(indices[micro], policy_row(window_[micro], kept[micro], nullptr));
  }
  read_window(mine, metrics_, nullptr);
}

nlohmann::json PreferenceObjective::step_metrics() { return metrics_.take("", false); }

nlohmann::json PreferenceObjective::evaluate() {
  PreferenceMetrics metrics(options_);
  const data::PackedRowsView rows = context_.cache->eval();
  const bool reference = ops::preference_loss_uses_reference(options_);
  forward_split(rows, reference ? &eval_reference_ : nullptr, &metrics, kto_labels(false));
  nlohmann::json record = metrics.take("eval_", true);
  record["eval_pairs"] = rows.rows();
  return record;
}

}  // namespace surogate::train
