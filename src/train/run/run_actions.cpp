// The run's actions besides training steps; see run_actions.h.
#include "train/run/run_actions.h"

#include <filesystem>

#include <fmt/format.h>

#include "train/checkpoint_io.h"
#include "train/lora_targets.h"
#include "train/model_outputs.h"
#include "train/model_weights.h"
#include "train/observe/html_report.h"
#include "train/observe/run_summary.h"
#include "train/process_run.h"

namespace surogate::train {
namespace fs = std::filesystem;

// surogate dpo / grpo: the objective's metrics on the validation split (dpo: through the training
// device; grpo: its rollouts).
void evaluate_objective(RunContext& run, bool final_eval) {
  if (run.cache->eval().rows() == 0) return;
  nlohmann::json record = run.objective->evaluate();
  record.update({{"step", run.state.step}, {"final", final_eval}});
  run.state.eval_history.push_back(record);
  run.log("eval", record);
  const double loss = record.value("eval_loss", 0.0);
  if (!run.result.initial_eval_loss) run.result.initial_eval_loss = loss;
  run.result.eval_loss = loss;
  if (record.contains("eval_reward")) {  // surogate grpo (train/objective/grpo_evaluation.h)
    const nlohmann::json& reward = record["eval_reward"];
    run.message(fmt::format("eval @ step {}: reward {} | completion length {:.1f} ({} prompts)", run.state.step,
                            reward.is_number() ? fmt::format("{:.4f}", reward.get<double>()) : "n/a",
                            record.value("eval_completions/mean_length", 0.0), record.value("eval_prompts", int64_t{0})));
    return;
  }
  run.result.eval_accuracy = record.value("eval_rewards/accuracies", 0.0);
  run.message(fmt::format("eval @ step {}: loss {:.4f} | reward accuracy {:.1f}% | margin {:.4f} ({} pairs)",
                          run.state.step, loss, 100.0 * *run.result.eval_accuracy,
                          record.value("eval_rewards/margins", 0.0), record.value("eval_pairs", int64_t{0})));
}

void evaluate(RunContext& run, bool final_eval) {
  if (run.objective) {
    evaluate_objective(run, final_eval);
    return;
  }
  if (run.cache->eval().rows() > 0) run.device->before_evaluation();  // every process: it may be collective
  if (run.evaluator) {
    EvalResult eval = run.evaluator->run();
    nlohmann::json record{{"step", run.state.step}, {"eval_loss", eval.loss}, {"eval_accuracy", eval.accuracy},
                          {"eval_tokens", eval.tokens}, {"final", final_eval}};
    run.state.eval_history.push_back(record);
    run.log("eval", record);
    if (!run.result.initial_eval_loss) run.result.initial_eval_loss = eval.loss;
    run.result.eval_loss = eval.loss;
    run.result.eval_accuracy = eval.accuracy;
    run.message(fmt::format("eval @ step {}: loss {:.4f} | token accuracy {:.1f}% ({} tokens)", run.state.step,
                            eval.loss, 100.0 * eval.accuracy, eval.tokens));
  }
  wait_for_rank_zero(*run.world);
}

void save_checkpoint(RunContext& run) {
  const RunClock::time_point start = RunClock::now();
  log_saved(run, run.writer->wait());
  CheckpointSnapshot snapshot = take_checkpoint_snapshot(*run.device, run.state, run.world->leads());
  snapshot.blocked_seconds = seconds_since(start);
  if (run.world->leads()) run.writer->start(std::move(snapshot));
  run.last_saved_step = run.state.step;
  wait_for_rank_zero(*run.world);
}

void log_saved(RunContext& run, const std::optional<SavedCheckpoint>& saved) {
  if (!saved) return;
  run.result.checkpoint = saved->path;
  run.log("checkpoint", {{"step", saved->step}, {"path", saved->path.string()}, {"bytes", saved->bytes},
                         {"blocked_seconds", saved->blocked_seconds}, {"write_seconds", saved->write_seconds}});
}

// The merged model goes to a separate folder: transformers treats a folder holding
// adapter_config.json as an adapter.
void write_outputs(RunContext& run) {
  const Config& config = run.config;
  log_saved(run, run.writer->wait());  // download() writes the host copies a checkpoint in flight reads
  run.device->download();
  const std::span<const WeightView> weights = run.device->weights();
  if (!run.lora) {
    if (run.vision) {
      run.vision->save_model(config.run.output_dir, weights.first(run.specs.size()));
    } else {
      save_hf_model(config.run.output_dir, run.model_config, config.model.name_or_path, run.specs,
                    weights.first(run.specs.size()));
    }
    return;
  }
  LoraSettings settings{static_cast<int>(config.lora.lora_rank), static_cast<int>(config.lora.lora_alpha),
                        config.lora.lora_dropout, run.lora->options.target_modules};
  nlohmann::json adapter_config = peft_adapter_config(settings, config.model.name_or_path);
  if (run.vision) run.vision->restrict_adapter_config(adapter_config, *run.lora);
  save_peft_output(config.run.output_dir, config.model.name_or_path, run.lora->adapters, weights, adapter_config);
  if (config.lora.merge_adapter) {
    const fs::path merged = merged_model_dir(config.run.output_dir);
    std::vector<WeightView> merged_views;
    std::vector<std::vector<float>> merged_values =
        merge_into_base(config, run.specs, *run.lora, weights, run.device->trainable(), !run.quantized.empty(),
                        run.base_weight_reader());
    for (size_t i = 0; i < run.specs.size(); ++i) {
      merged_views.push_back({run.specs[i].name, run.specs[i].shape, merged_values[i]});
    }
    if (run.vision) {
      run.vision->save_model(merged, merged_views);
    } else {
      save_hf_model(merged, run.model_config, config.model.name_or_path, run.specs, merged_views);
    }
    run.message(fmt::format("merged model written to {}", merged.string()));
  }
}

namespace {

// The trackers upload what they hold (wandb online); the run itself is complete.
void finish_trackers(RunContext& run) {
  if (run.trackers) {
    run.trackers->finish(std::chrono::seconds(300), [&run](const std::string& line) { run.message(line); });
  }
}

}  // namespace

void stop_early(RunContext& run) {
  run.display.finish();
  if (run.last_saved_step != run.state.step) save_checkpoint(run);
  log_saved(run, run.writer->wait());  // the stop names a complete checkpoint
  run.log("stopped", {{"step", run.state.step}, {"checkpoint", run.result.checkpoint.string()}});
  run.message(fmt::format("stopped at step {} of {}: checkpoint {} (resume_from_checkpoint: true continues from it)",
                          run.state.step, run.state.total_steps, run.result.checkpoint.string()));
  report_time_breakdown(run);
  finish_trackers(run);
  run.result.steps = run.state.step;
  run.result.stopped = true;
}

void report_time_breakdown(RunContext& run) {
  if (!run.config.logging.debug_time_breakdown || run.time_breakdown.empty()) return;
  nlohmann::json record = run.time_breakdown.record();
  record["host_phases"] = run.host_phases.record();
  if (!run.device_phases.empty()) record["device_phases"] = run.device_phases.record();
  run.log("time_breakdown", record);
  run.message(run.time_breakdown.table());
  run.message(run.host_phases.table("host time per step (wall clock)", "ms"));
  if (!run.device_phases.empty()) {
    run.message(run.device_phases.table("GPU time per step on the first rank, by phase of the data-parallel step", "ms"));
  }
}

void fail_diverged(RunContext& run, const StepVerdict& verdict) {
  run.display.finish();
  log_saved(run, run.writer->wait());  // the checkpoint in flight is good: finish it before naming the last one
  std::string last = run.store->latest() ? run.store->latest()->string() : std::string("none written yet");
  run.log("error", {{"step", run.state.step}, {"what", verdict.nonfinite.value_or("loss")},
                    {"consecutive_nonfinite_steps", run.state.consecutive_nonfinite_steps}});
  throw TrainingDiverged(run.guard->divergence(verdict, run.state, last));
}

void finish_run(RunContext& run, RunClock::time_point started) {
  const Config& config = run.config;
  run.display.finish();
  evaluate(run, true);
  if (run.last_saved_step != run.state.step) save_checkpoint(run);
  run.result.steps = run.state.step;
  run.result.skipped_steps = run.state.skipped_steps;
  if (!run.world->leads()) {
    wait_for_rank_zero(*run.world);
    run.result.seconds = seconds_since(started);
    return;
  }
  write_outputs(run);
  log_saved(run, run.writer->wait());
  run.result.seconds = seconds_since(started);
  const SummaryRows rows =
      run_summary_rows({&config, &run.state, &run.result, run.guard->summary_rows(run.state), run.options.restarts,
                        run.model_config.vocab_size, run.lora.has_value(), run.run_name});
  run.result.report_file = fs::path(config.run.output_dir) / fmt::format("report-{}.html", run.run_name);
  auto plots = gpu_plot_series(run.state.gpu_history);
  if (config.grpo.enabled) {  // surogate grpo: the mean reward over steps, first
    plots.insert(plots.begin(), {"reward", {history_series(run.state.history, "reward", "mean reward", "#ff7f0e")}});
  }
  const char* command = run.options.pretraining ? "pt" : config.grpo.enabled ? "grpo" : "sft";
  write_html_report(run.result.report_file, fmt::format("Surogate {} run '{}'", command, run.run_name),
                    run.state.history, run.state.eval_history, rows, plots);
  nlohmann::json summary = nlohmann::json::object();
  for (const auto& [key, value] : rows) summary[key] = value;
  run.log("summary", summary);
  run.message(format_summary_table("training summary", rows));
  report_time_breakdown(run);
  finish_trackers(run);
  wait_for_rank_zero(*run.world);
}

}  // namespace surogate::train
