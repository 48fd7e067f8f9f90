// The prompts of `surogate grpo`; see grpo_prompts.h.
#include "train/objective/grpo_prompts.h"

#include <algorithm>

#include <xxhash.h>

#include "core/error.h"
#include "data/dataset_files.h"
#include "data/pipeline.h"
#include "data/row_reader.h"

namespace surogate::train {

PromptSet read_prompt_rows(const Config& config) {
  const data::DataSettings settings = data::data_settings_from_config(config);
  const data::TextTools tools = data::load_text_tools(settings);
  PromptSet set;
  set.pad_id = tools.codec.pad_id.value_or(tools.codec.eos_id.value_or(0));
  std::vector<data::PromptRow>& prompts = set.rows;
  for (const DatasetConfig& dataset : config.data.datasets) {
    std::unique_ptr<data::RowReader> reader = data::open_row_reader(data::select_dataset_files(dataset));
    data::Row row;
    for (uint64_t read = 0; (!dataset.samples || read < static_cast<uint64_t>(*dataset.samples)) && reader->next(row);
         ++read) {
      prompts.push_back(data::read_prompt_row(row, tools.codec, tools.renderer, config.grpo.max_prompt_length,
                                              dataset.prompt_field));
    }
  }
  if (prompts.empty()) fail_user("{}: the training datasets hold no prompt rows", config.sources.of("datasets"));
  return set;
}

std::shared_ptr<data::TokenCache> prompt_token_cache(const std::vector<data::PromptRow>& prompts,
                                                     const std::filesystem::path& path, int32_t pad_id) {
  size_t longest = 1;
  for (const data::PromptRow& prompt : prompts) longest = std::max(longest, prompt.prompt_ids.size());
  data::PackedRows rows;
  rows.sequence_length = longest;
  XXH64_state_t* hash = XXH64_createState();
  XXH64_reset(hash, 0x67727030);
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
  const uint64_t key = XXH64_digest(hash);
  XXH64_freeState(hash);
  data::TokenCache::Problem problem;
  if (auto cache = data::TokenCache::open(path, key, problem)) return cache;
  std::filesystem::create_directories(path.parent_path());
  data::PackedRows eval;
  eval.sequence_length = longest;
  data::write_token_cache(path, key, rows, eval, nlohmann::json{{"pad_id", pad_id}, {"prompts", prompts.size()}});
  auto cache = data::TokenCache::open(path, key, problem);
  SUROGATE_CHECK(cache != nullptr, "the prompt cache just written opens");
  return cache;
}

}  // namespace surogate::train
