// The last start-up steps: the schedule, the evaluator, the checkpoints (and resuming from one)
// and the run's records; see start_run.h.
#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "models/model_spec.h"
#include "train/observe/run_records.h"
#include "train/process_run.h"
#include "train/run/start_run.h"

namespace surogate::train {

void schedule_steps(RunContext& run) {
  const Config& config = run.config;
  const int64_t accumulation = std::max<int64_t>(1, config.schedule.gradient_accumulation_steps);
  // One step reads accumulation micro-batches per data-parallel rank (effective batch = batch × accumulation × ranks).
  const int64_t steps_per_epoch =
      std::max<int64_t>(1, run.batches_per_epoch / (accumulation * run.device->data_parallel_ranks()));
  run.state.total_steps =
      config.schedule.max_steps > 0 ? config.schedule.max_steps : config.schedule.num_epochs * steps_per_epoch;
  if (run.state.total_steps <= 0) {
    fail_user("{}: the run has no steps; set num_epochs or max_steps", config.sources.of("num_epochs"));
  }
  const LrScheduleSettings schedule =
      lr_schedule_settings(config.schedule, config.optimizer.learning_rate, run.state.total_steps);
  run.schedule = std::make_unique<LrSchedule>(schedule);
  run.state.train_seed = static_cast<uint64_t>(config.data.train_seed);
  run.state.schedule = {{"type", std::string(to_string(config.schedule.lr_scheduler_type))},
                        {"peak", schedule.peak_learning_rate},
                        {"total_steps", schedule.total_steps},
                        {"warmup_steps", schedule.warmup_steps},
                        {"cooldown_steps", schedule.cooldown_steps},
                        {"final_lr_fraction", schedule.final_lr_fraction}};
}

void make_evaluator(RunContext& run) {
  if (run.cache->eval().rows() == 0 || !run.world->leads()) return;
  if (run.config.loss.preference) return;  // surogate dpo evaluates through its objective (run_actions.cpp)
  const Config& config = run.config;
  run.evaluator = run.device->make_evaluator(
      {&run.model_config, &run.registry, run.batch, run.sequence, config.kernels.lmhead_chunks, run.cache,
       static_cast<uint64_t>(config.eval.eval_seed), run.pad_id, run.lora ? &*run.lora : nullptr,
       run.qlora ? &*run.qlora : nullptr, run.fp8 ? &*run.fp8 : nullptr, fp16_training(config),
       config.kernels.use_fused_rope, model_definition(config.model, config.sources), run.vision.get()});
}

namespace {

// The newest checkpoint whose files match their manifest; damaged or half-written ones are skipped
// with a warning naming them.
void resume(RunContext& run) {
  std::optional<ResumedRun> resumed =
      resume_latest_checkpoint(*run.world, *run.store, *run.device, [&run](const std::string& warning) {
        run.message("warning: " + warning);
        run.resume_warnings.push_back(warning);
      });
  if (!resumed) {
    run.message("resume_from_checkpoint: no checkpoint that verifies yet; starting from step 0");
    return;
  }
  resumed->state.total_steps = run.state.total_steps;
  resumed->state.schedule = run.state.schedule;
  run.state = std::move(resumed->state);
  run.guard->resume(run.state);
  run.loader->seek(run.state.loader);
  run.last_saved_step = run.state.step;
  if (resumed->folder) run.result.checkpoint = *resumed->folder;
  if (resumed->folder) run.message(fmt::format("resumed from {} (step {})", resumed->folder->string(), run.state.step));
}

}  // namespace

void open_checkpoints(RunContext& run) {
  const Config& config = run.config;
  run.guard = std::make_unique<StepGuard>(config.run, config.precision, fp16_training(config), run.state);
  run.store = std::make_unique<CheckpointStore>(config.checkpoint.checkpoint_dir.value_or(config.run.output_dir),
                                                static_cast<int>(config.checkpoint.save_total_limit));
  run.writer = std::make_unique<CheckpointWriter>(*run.store, run.options.faults.checkpoint_write_delay);
  if (config.checkpoint.resume_from_checkpoint) resume(run);
  run.result.first_step = run.state.step;
}

void open_records(RunContext& run) {
  const Config& config = run.config;
  if (run.world->leads()) {
    RunRecords records = open_run_records(
        config, run.run_name, run.state.step > 0, run.options.on_record,
        run.backend == TrainingBackend::Cuda ? static_cast<int>(run.device->data_parallel_ranks()) : 0,
        [&run](const std::string& line) { run.message(line); });
    run.log_file = std::move(records.log);
    run.trackers = std::move(records.trackers);
    run.gpu_log = std::move(records.gpu_log);
    run.result.log_file = run.log_file->path();
  }
  run.log("config", {{"run_name", run.run_name},
                     {"command", run.options.pretraining ? "pt" : "sft"},
                     {"model", config.model.name_or_path},
                     {"total_steps", run.state.total_steps},
                     {"start_step", run.state.step},
                     {"batch_size", run.batch},
                     {"sequence_len", run.sequence},
                     {"gradient_accumulation_steps", std::max<int64_t>(1, config.schedule.gradient_accumulation_steps)},
                     {"data_parallel_ranks", run.device->data_parallel_ranks()},
                     {"batches_per_epoch", run.batches_per_epoch},
                     {"parameters", models::parameter_count(run.specs)}});
  for (const std::string& warning : run.resume_warnings) run.log("warning", {{"what", warning}});
  for (const RestartRecord& restart : run.options.restarts) {
    run.message(fmt::format("restart {} of at most {} after the previous attempt ended: {}; {}", restart.attempt,
                            config.run.max_restarts, restart.reason,
                            run.result.first_step > 0 ? fmt::format("resumed at step {}", run.result.first_step)
                                                      : std::string("started again from step 0")));
  }
}

}  // namespace surogate::train
