// surogate grpo's data step of the start-up (start_run.h's load_prompts): the `type: prompt` rows
// as a token cache of one prompt per row (train/objective/grpo_prompts.h), walked by the same
// DataLoader as every other run's data — one prompt per batch — so the loader's position in a
// checkpoint resumes the prompts exactly; the validation prompts are the cache's eval split. The
// GRPO objective reads the rows' columns itself.
#include <filesystem>

#include <fmt/format.h>

#include "runtime/attention_settings.h"
#include "train/objective/grpo_prompts.h"
#include "train/objective/grpo_window.h"
#include "train/run/start_run.h"

namespace surogate::train {

void load_prompts(RunContext& run) {
  run.startup.end_phase("model config");
  const PromptSet prompts = read_prompt_rows(run.config);
  // Rows as long as the data needs: every prompt is already cut to max_prompt_length, so the
  // longest one bounds them all, and the training rows, the rollouts' KV cache slots and prefill
  // rows are planned for it instead of the option's bound (`--dry-run`, which reads no data, plans
  // for the bound). The same on every process and on resume: it depends on the data alone.
  const int64_t longest = longest_prompt(prompts);
  if (longest < run.config.grpo.max_prompt_length) {
    run.message(fmt::format("prompts: the longest has {} tokens; rows of {} + grpo.max_completion_length {} tokens "
                            "(grpo.max_prompt_length {} bounds them)",
                            longest, longest, run.config.grpo.max_completion_length, run.config.grpo.max_prompt_length));
    run.config.grpo.max_prompt_length = longest;
  }
  const Config& config = run.config;
  run.cache = prompt_token_cache(prompts, std::filesystem::path(config.run.output_dir) / "tokenized" / "prompts.surotok");
  run.startup.end_phase("data");
  run.message(prompts.eval_rows.empty()
                  ? fmt::format("prompts: {} rows", prompts.rows.size())
                  : fmt::format("prompts: {} rows, {} for evaluation", prompts.rows.size(), prompts.eval_rows.size()));
  run.pad_id = prompts.pad_id;
  // Every row the GRPO step trains on is one prompt + completion and its padding (grpo_window.cpp's
  // add_row): at most two segments, the bound cuDNN's packed-documents attention is laid out for
  // (runtime/cuda_attention_path.h); without one the training graph ran our attention kernels.
  runtime::AttentionSettings attention = runtime::attention_settings();
  attention.segments_per_row = kGrpoSegmentsPerRow;
  runtime::set_attention_settings(attention);
  run.batch = config.schedule.per_device_train_batch_size;  // completions, as in TRL
  run.sequence = config.grpo.max_prompt_length + config.grpo.max_completion_length;
  run.loader = std::make_unique<data::DataLoader>(run.cache, run.cache->train(), 1,
                                                  static_cast<uint64_t>(config.data.train_seed), run.pad_id);
  // The step loop counts micro-batches of completions: num_generations per prompt, each generation
  // trained num_iterations times (TRL's epoch of num_iterations × the steps).
  run.batches_per_epoch = static_cast<int64_t>(prompts.rows.size()) * config.grpo.num_generations *
                          config.grpo.num_iterations / run.batch;
}

}  // namespace surogate::train
