// The prompts of `surogate grpo`; see grpo_prompts.h.
#include "train/objective/grpo_prompts.h"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <random>

#include <xxhash.h>

#include "core/error.h"
#include "data/dataset_files.h"
#include "data/pipeline.h"
#include "data/row_reader.h"

namespace surogate::train {

namespace {

// The rows of `dataset`, up to its `samples`.
std::vector<data::PromptRow> read_dataset_prompts(const Config& config, const DatasetConfig& dataset,
                                                  const data::TextTools& tools) {
  std::vector<data::PromptRow> prompts;
  std::unique_ptr<data::RowReader> reader = data::open_row_reader(data::select_dataset_files(dataset));
  data::Row row;
  for (uint64_t read = 0; (!dataset.samples || read < static_cast<uint64_t>(*dataset.samples)) && reader->next(row);
       ++read) {
    prompts.push_back(data::read_prompt_row(row, tools.codec, tools.renderer, config.grpo.max_prompt_length,
                                            dataset.prompt_field));
  }
  return prompts;
}

// data/pipeline.cpp's hold-out: the first ratio × rows of a permutation seeded with `seed` (the
// same draws), so a prompt dataset splits as any other.
void hold_out(std::vector<data::PromptRow>& rows, double ratio, int64_t seed, PromptSet& set) {
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 generator(static_cast<uint64_t>(seed));
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[generator() % i]);
  const auto held = static_cast<size_t>(static_cast<double>(rows.size()) * ratio);
  for (size_t k = 0; k < order.size(); ++k) (k < held ? set.eval_rows : set.rows).push_back(std::move(rows[order[k]]));
}

}  // namespace

int64_t longest_prompt(const PromptSet& prompts) {
  size_t longest = 1;
  for (const auto* rows : {&prompts.rows, &prompts.eval_rows}) {
    for (const data::PromptRow& row : *rows) longest = std::max(longest, row.prompt_ids.size());
  }
  return static_cast<int64_t>(longest);
}

PromptSet read_prompt_rows(const Config& config) {
  const data::DataSettings settings = data::data_settings_from_config(config);
  const data::TextTools tools = data::load_text_tools(settings);
  PromptSet set;
  set.pad_id = tools.codec.pad_id.value_or(tools.codec.eos_id.value_or(0));
  const bool split = config.eval.validation_datasets.empty() && config.eval.validation_split_ratio > 0.0 &&
                     config.sources.by_key.contains("validation_split_ratio");
  for (const DatasetConfig& dataset : config.data.datasets) {
    std::vector<data::PromptRow> rows = read_dataset_prompts(config, dataset, tools);
    if (split) {
      hold_out(rows, config.eval.validation_split_ratio, config.eval.eval_seed, set);
    } else {
      std::move(rows.begin(), rows.end(), std::back_inserter(set.rows));
    }
  }
  for (const DatasetConfig& dataset : config.eval.validation_datasets) {
    std::vector<data::PromptRow> rows = read_dataset_prompts(config, dataset, tools);
    std::move(rows.begin(), rows.end(), std::back_inserter(set.eval_rows));
  }
  if (set.rows.empty()) fail_user("{}: the training datasets hold no prompt rows", config.sources.of("datasets"));
  return set;
}

namespace {

// Rows of `longest` tokens, one prompt each, no loss token; its ids and lengths go into `hash`.
data::PackedRows prompt_rows(const std::vector<data::PromptRow>& prompts, size_t longest, int32_t pad_id,
                             XXH64_state_t* hash) {
  data::PackedRows rows;
  rows.sequence_length = longest;
  for (const data::PromptRow& prompt : prompts) {
    const std::vector<int32_t>& ids = prompt.prompt_ids;
    XXH64_update(hash, ids.data(), ids.size() * sizeof(int32_t));
    const int32_t size = static_cast<int32_t>(ids.size());
    XXH64_update(hash, &size, sizeof(size));
    for (size_t at = 0; at < longest; ++at) {
      rows.input_ids.push_back(at < ids.size() ? ids[at] : pad_id);
      rows.labels.push_back(data::kIgnoreLabel);
      rows.position_ids.push_back(at < ids.size() ? static_cast<int32_t>(at) : 0);
    }
    rows.segment_lengths.push_back(size);
    if (ids.size() < longest) rows.segment_lengths.push_back(-static_cast<int32_t>(longest - ids.size()));
    rows.row_segment_offsets.push_back(rows.segment_lengths.size());
  }
  return rows;
}

}  // namespace

std::shared_ptr<data::TokenCache> prompt_token_cache(const PromptSet& prompts, const std::filesystem::path& path) {
  size_t longest = 1;
  for (const auto* list : {&prompts.rows, &prompts.eval_rows}) {
    for (const data::PromptRow& prompt : *list) longest = std::max(longest, prompt.prompt_ids.size());
  }
  XXH64_state_t* hash = XXH64_createState();
  XXH64_reset(hash, 0x67727030);
  const data::PackedRows rows = prompt_rows(prompts.rows, longest, prompts.pad_id, hash);
  // The eval rows' count too: the same ids split differently are another cache.
  const uint64_t eval_count = prompts.eval_rows.size();
  XXH64_update(hash, &eval_count, sizeof(eval_count));
  const data::PackedRows eval = prompt_rows(prompts.eval_rows, longest, prompts.pad_id, hash);
  const uint64_t key = XXH64_digest(hash);
  XXH64_freeState(hash);
  data::TokenCache::Problem problem;
  if (auto cache = data::TokenCache::open(path, key, problem)) return cache;
  std::filesystem::create_directories(path.parent_path());
  data::write_token_cache(path, key, rows, eval,
                          nlohmann::json{{"pad_id", prompts.pad_id}, {"prompts", prompts.rows.size()},
                                         {"eval_prompts", prompts.eval_rows.size()}});
  auto cache = data::TokenCache::open(path, key, problem);
  SUROGATE_CHECK(cache != nullptr, "the prompt cache just written opens");
  return cache;
}

}  // namespace surogate::train
