// GRPO's rollout models on every rank (grpo_objective.h): one KV-cache model per rank of this
// process whose backend holds the whole model (TrainingDevice::weight_ranks: the single device, or
// each data-parallel replica under ZeRO-1/2), reading that rank's own weights in place on the rank's
// own thread and device — the LoRA adapter live, the base as the rank holds it.
//
// A step's prompts are split by whole prompts (so whole groups of num_generations completions):
// rank r samples the completions [r·n, (r+1)·n) of the step, n = per_device_train_batch_size ×
// gradient_accumulation_steps, with the seeds those completions get on one rank (rl/group_sampling.h:
// completion k of the run samples with splitmix64(seed + k), whatever runs beside it). So the
// sampling state of every rank is the one RolloutSeeds the checkpoint keeps, and N ranks sample the
// completions one rank with N times the accumulation samples. The rewards and advantages are then
// computed over all of them in this process (TRL's gather across processes before the group
// statistics; over several processes, after grpo_process_rollouts.h brought every process's here),
// and the completions are put in window order (grpo_window_order) so that the data-parallel device
// trains each rank's on that rank (distributed::owner_of_micro_batch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "generate/kv_cache_model.h"
#include "generate/kv_cache_plans.h"
#include "generate/next_token_model.h"
#include "rl/group_sampling.h"
#include "tokenizer/tokenizer.h"

namespace surogate::train {

class TrainingDevice;

// For each row of the window (micro-batch m holds rows [m·batch, (m+1)·batch)), the index of its
// completion among the step's completions in generation order (rank by rank). Window micro-batch
// k·ranks + r is rank r's k-th: rank r's completions [k·batch, (k+1)·batch). The identity on one rank.
std::vector<size_t> grpo_window_order(int64_t ranks, int64_t accumulation, int64_t batch);

// `values` in `order` (values[order[i]] at i).
template <typename T>
std::vector<T> in_window_order(const std::vector<T>& values, const std::vector<size_t>& order) {
  std::vector<T> out;
  out.reserve(order.size());
  for (const size_t at : order) out.push_back(values.at(at));
  return out;
}

class GrpoRankModels {
public:
  // One model per weight rank of `device`, opened on the rank's thread over its backend (`weights`
  // without a backend: the forms the ranks hold them in), with `prefill`'s plan (default: the
  // KV cache model's). InternalError when no rank holds them.
  GrpoRankModels(TrainingDevice& device, generate::LoadedWeights weights, const std::filesystem::path& model_dir,
                 const generate::ModelOptions& options, const generate::PrefillShape& prefill = {});
  // One model per weight rank holding weights of its own: the folder's, loaded on the rank's
  // thread onto its device (generate/kv_cache_model.h's open_kv_cache_model; bf16 on CUDA, fp32 on
  // the CPU). GRPO's KL reference under full fine-tuning: a frozen copy of the starting weights,
  // which the optimizer never writes.
  GrpoRankModels(TrainingDevice& device, const std::filesystem::path& model_dir, const generate::ModelOptions& options);
  ~GrpoRankModels();

  int ranks() const { return static_cast<int>(models_.size()); }

  // num_generations completions of each prompt, group by group (rl::generate_groups's layout and
  // seeds: `seeds` advances by all of them), the prompts split evenly over the ranks, each rank's
  // slots cleared first (they hold the keys of older weights). InternalError when the prompts do
  // not split evenly.
  // Over several processes `prompts` are every process's: the run has `all_ranks` ranks of which
  // this process's are [first_rank, first_rank + ranks()) (distributed/process_world.h), and only
  // theirs are sampled — the completions, seeds and prompt indices one process of all_ranks ranks
  // gives them (grpo_process_rollouts.h gathers the rest); `seeds` still advances by all.
  std::vector<rl::Rollout> generate(const std::vector<std::vector<int32_t>>& prompts, const rl::RolloutOptions& options,
                                    rl::RolloutSeeds& seeds, const tokenizer::Tokenizer* tokenizer,
                                    generate::GenerationStats* stats, int first_rank = 0, int all_ranks = 0);

  // work(model) on the first rank's thread (the evaluation's rollouts).
  void on_first(const std::function<void(generate::NextTokenModel& model)>& work);
  // work(rank, model) on every rank's thread at once.
  void on_each(const std::function<void(int rank, generate::NextTokenModel& model)>& work);

private:
  // open(rank, backend) on every weight rank's thread, one at a time.
  void open_on_ranks(const std::function<std::unique_ptr<generate::NextTokenModel>(const runtime::Backend&)>& open);

  TrainingDevice& device_;
  std::vector<std::unique_ptr<generate::NextTokenModel>> models_;
};

}  // namespace surogate::train
