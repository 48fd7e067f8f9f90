// GRPO's rollout models on every rank; see grpo_rank_models.h.
#include "train/objective/grpo_rank_models.h"

#include <mutex>

#include "core/error.h"
#include "train/device/training_device.h"

namespace surogate::train {

std::vector<size_t> grpo_window_order(int64_t ranks, int64_t accumulation, int64_t batch) {
  std::vector<size_t> order;
  order.reserve(static_cast<size_t>(ranks * accumulation * batch));
  for (int64_t k = 0; k < accumulation; ++k) {
    for (int64_t r = 0; r < ranks; ++r) {
      for (int64_t row = 0; row < batch; ++row) order.push_back(static_cast<size_t>((r * accumulation + k) * batch + row));
    }
  }
  return order;
}

GrpoRankModels::GrpoRankModels(TrainingDevice& device, generate::LoadedWeights weights,
                               const std::filesystem::path& model_dir, const generate::ModelOptions& options,
                               const generate::PrefillShape& prefill)
    : device_(device) {
  open_on_ranks([&](const runtime::Backend& backend) {
    generate::LoadedWeights own = weights;
    own.backend = &backend;
    return generate::open_kv_cache_on_weights(own, model_dir, options, prefill);
  });
}

GrpoRankModels::GrpoRankModels(TrainingDevice& device, const std::filesystem::path& model_dir,
                               const generate::ModelOptions& options)
    : device_(device) {
  open_on_ranks([&](const runtime::Backend&) { return generate::open_kv_cache_model(model_dir, options); });
}

void GrpoRankModels::open_on_ranks(
    const std::function<std::unique_ptr<generate::NextTokenModel>(const runtime::Backend&)>& open) {
  const int ranks = device_.weight_ranks();
  SUROGATE_CHECK(ranks > 0, "surogate grpo runs on ranks that each hold the whole model's weights");
  models_.resize(static_cast<size_t>(ranks));
  std::mutex opening;  // one model compiled at a time; each on its rank's thread (its GPU)
  device_.on_weight_ranks([&](int rank, const runtime::Backend& backend) {
    const std::lock_guard<std::mutex> lock(opening);
    models_[static_cast<size_t>(rank)] = open(backend);
  });
}

// Each model is released on its rank's thread, where it was made (its GPU current).
GrpoRankModels::~GrpoRankModels() {
  if (models_.size() <= 1) return;
  try {
    device_.on_weight_ranks([&](int rank, const runtime::Backend&) { models_[static_cast<size_t>(rank)].reset(); });
  } catch (...) {
    // A rank that failed already stopped the run: the rest are released here.
  }
}

std::vector<rl::Rollout> GrpoRankModels::generate(const std::vector<std::vector<int32_t>>& prompts,
                                                  const rl::RolloutOptions& options, rl::RolloutSeeds& seeds,
                                                  const tokenizer::Tokenizer* tokenizer,
                                                  generate::GenerationStats* stats, int first_rank, int all_ranks) {
  const auto ranks = static_cast<size_t>(this->ranks());
  const auto world = static_cast<size_t>(all_ranks > 0 ? all_ranks : this->ranks());
  const auto first = static_cast<size_t>(first_rank);
  SUROGATE_CHECK(first + ranks <= world, "ranks [{}, {}) of {}", first, first + ranks, world);
  SUROGATE_CHECK(prompts.size() % world == 0, "{} GRPO prompts split evenly over {} ranks", prompts.size(), world);
  const size_t share = prompts.size() / world;
  const auto per_rank = static_cast<uint64_t>(share) * static_cast<uint64_t>(options.num_generations);
  std::vector<std::vector<rl::Rollout>> by_rank(ranks);
  std::vector<generate::GenerationStats> rank_stats(ranks);
  std::vector<rl::RolloutSeeds> rank_seeds(ranks, seeds);
  for (size_t r = 0; r < ranks; ++r) {  // rank first + r's completions are the step's [(first + r)·n, ...)
    for (uint64_t k = 0; k < (first + r) * per_rank; ++k) rank_seeds[r].next();
  }
  on_each([&](int rank, generate::NextTokenModel& model) {
    const auto r = static_cast<size_t>(rank);
    for (int64_t slot = 0; slot < model.slots(); ++slot) model.clear(slot);
    const size_t from = (first + r) * share;
    const std::vector<std::vector<int32_t>> own(prompts.begin() + static_cast<std::ptrdiff_t>(from),
                                                prompts.begin() + static_cast<std::ptrdiff_t>(from + share));
    by_rank[r] = rl::generate_groups(model, own, options, rank_seeds[r], tokenizer, &rank_stats[r]);
  });
  for (uint64_t k = 0; k < world * per_rank; ++k) seeds.next();  // every rank's completions drew theirs
  std::vector<rl::Rollout> rollouts;
  for (size_t r = 0; r < ranks; ++r) {
    for (rl::Rollout& rollout : by_rank[r]) {
      rollout.prompt += (first + r) * share;
      rollouts.push_back(std::move(rollout));
    }
    if (stats != nullptr) *stats += rank_stats[r];
  }
  return rollouts;
}

void GrpoRankModels::on_first(const std::function<void(generate::NextTokenModel& model)>& work) {
  on_each([&](int rank, generate::NextTokenModel& model) {
    if (rank == 0) work(model);
  });
}

void GrpoRankModels::on_each(const std::function<void(int rank, generate::NextTokenModel& model)>& work) {
  device_.on_weight_ranks([&](int rank, const runtime::Backend&) { work(rank, *models_.at(static_cast<size_t>(rank))); });
}

}  // namespace surogate::train
