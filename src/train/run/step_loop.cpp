// The step loop; see step_loop.h. Per optimizer step: gradient_accumulation_steps micro-batches per
// data-parallel rank (loss scaled by 1 / loss tokens of the window, so gradients accumulate to the
// window's mean) → global grad norm → the step guard's verdict → optimizer step at the schedule's
// LR (or none: a skipped step) → log, eval, checkpoint.
#include "train/run/step_loop.h"

#include <algorithm>

#include <fmt/format.h>

#include "train/injected_faults.h"
#include "train/observe/run_summary.h"
#include "train/run/run_actions.h"

namespace surogate::train {
namespace {

// The window's micro-batches this process trains (its ranks'), and each one's index in the window.
struct StepWindow {
  int64_t size = 0;  // micro-batches of every rank
  std::vector<int64_t> indices;
  std::vector<data::PackedBatch> batches;
  std::vector<MicroBatchTotals> taken;
};

StepWindow make_window(const RunContext& run) {
  StepWindow window;
  const int64_t accumulation = std::max<int64_t>(1, run.config.schedule.gradient_accumulation_steps);
  window.size = accumulation * run.device->data_parallel_ranks();
  for (int64_t index = 0; index < window.size; ++index) {
    if (run.device->takes_micro_batch(index)) window.indices.push_back(index);
  }
  window.batches.resize(window.indices.size());
  window.taken.resize(window.batches.size());
  return window;
}

// This process reads its ranks' micro-batches of the window and skips the others'.
void read_window(RunContext& run, StepWindow& window) {
  for (int64_t index = 0, next = 0; index < window.size; ++index) {
    if (next == static_cast<int64_t>(window.indices.size()) || window.indices[static_cast<size_t>(next)] != index) {
      run.loader->skip();
      continue;
    }
    data::PackedBatch& batch = window.batches[static_cast<size_t>(next)];
    batch = run.loader->next();
    window.taken[static_cast<size_t>(next++)] = {batch.loss_weight_sum, batch.num_loss_tokens, batch.num_tokens};
  }
}

// surogate grpo: the objective makes the window (rollouts of its prompts, train/objective/), and its
// sampling state goes into the next checkpoint; every other mode reads the loader.
void take_window(RunContext& run, StepWindow& window) {
  if (!run.objective || !run.objective->makes_window()) return read_window(run, window);
  run.objective->make_window(*run.loader, window.batches);  // this process's micro-batches of the window
  for (size_t micro = 0; micro < window.batches.size(); ++micro) {
    const data::PackedBatch& batch = window.batches[micro];
    window.taken[micro] = {batch.loss_weight_sum, batch.num_loss_tokens, batch.num_tokens};
  }
  run.state.objective = run.objective->checkpoint_state();
}

// debug_time_breakdown's host side: milliseconds of a step's phases, in order.
struct HostPhases {
  std::vector<std::pair<std::string, double>> milliseconds;
  RunClock::time_point mark = RunClock::now();
  // The time since the last mark (or the start) added to `phase`.
  void end(const std::string& phase) {
    const double ms = 1e3 * seconds_since(mark);
    mark = RunClock::now();
    auto it = std::find_if(milliseconds.begin(), milliseconds.end(), [&](const auto& p) { return p.first == phase; });
    if (it == milliseconds.end()) milliseconds.emplace_back(phase, ms);
    else it->second += ms;
  }
};

struct StepOutcome {
  MicroBatchTotals totals;
  StepMetrics metrics;
  StepVerdict verdict;
  double learning_rate = 0.0;
  nlohmann::json record;  // the guard's fields; record_step adds the step's
};

// Accumulates the window's micro-batches, measures, and applies (or skips) the optimizer step.
StepOutcome train_step(RunContext& run, const StepWindow& window, HostPhases& host) {
  StepOutcome outcome;
  // Σ token weights of the whole window (= loss tokens unless loss_scale weighs tokens).
  outcome.totals = run.device->window_totals(window.taken);
  // The loss is the window's weighted mean Σ w·ce / Σ w (the plain token mean when unweighted);
  // fp16: times the loss scale, so every gradient is that much larger (undone by the update).
  const float scale = outcome.totals.loss_weight > 0.0
                          ? static_cast<float>(run.guard->loss_scale() / outcome.totals.loss_weight)
                          : 0.0f;
  if (run.objective) run.objective->begin_window(window.batches, run.guard->loss_scale());
  for (size_t micro = 0; micro < window.batches.size(); ++micro) {
    std::vector<runtime::InputBinding> bindings = run.inputs->bind(window.batches[micro], scale);
    if (run.objective) {
      for (const runtime::InputBinding& binding : run.objective->bind(micro)) bindings.push_back(binding);
    }
    if (run.dropout_seed != graph::kNoTensor) {
      run.dropout_seed_value = dropout_seed(run.state.train_seed, run.state.step, window.indices[micro]);
      bindings.push_back({run.dropout_seed, std::as_bytes(std::span<const int32_t>(&run.dropout_seed_value, 1))});
    }
    host.end("bind inputs");
    run.device->accumulate(bindings);
    host.end("accumulate (enqueue or run)");
  }
  outcome.metrics = run.device->measure();
  host.end("measure (wait for the device)");
  if (run.objective) run.objective->observe(*run.device);  // every rank's micro-batches ran in measure()
  if (run.config.logging.debug_time_breakdown) {
    run.time_breakdown.add(run.device->time_breakdown());  // measure() waited
    run.device_phases.add(run.device->step_phases());      // the step before this one's
  }
  outcome.learning_rate = run.schedule->learning_rate(run.state.step);
  outcome.verdict = run.guard->judge(injected_loss(run.options.faults, run.state.step + 1, outcome.metrics.loss),
                                     outcome.metrics.grad_norm, run.state, outcome.record);
  if (outcome.verdict.apply) {
    run.device->update(
        {run.state.step, outcome.learning_rate, run.config.optimizer.weight_decay, outcome.verdict.gradient_scale});
  } else {
    run.device->skip_update();
  }
  host.end("update");
  ++run.state.step;
  run.state.loader = run.loader->position();
  if (auto line = run.guard->message(outcome.verdict, run.state)) run.message(*line);
  return outcome;
}

// Mean seconds per step so far, for the display's time left.
struct StepTiming {
  double total_seconds = 0.0;
  int64_t steps = 0;
};

// The step's log record, history, GPU sample and display line; a diverged run stops here.
void record_step(RunContext& run, const StepWindow& window, StepOutcome& outcome, double seconds, StepTiming& timing) {
  timing.total_seconds += seconds;
  ++timing.steps;
  const double loss = outcome.verdict.loss, grad_norm = outcome.verdict.grad_norm;
  const int64_t tokens = outcome.totals.tokens;
  const double epoch =
      static_cast<double>(run.state.loader.epoch) +
      static_cast<double>(run.state.loader.index) / static_cast<double>(std::max<int64_t>(1, run.batches_per_epoch));
  nlohmann::json& record = outcome.record;
  record.update({{"step", run.state.step}, {"epoch", epoch}, {"loss", loss}, {"lr", outcome.learning_rate},
                 {"grad_norm", grad_norm}, {"tokens", tokens}, {"loss_tokens", outcome.totals.loss_tokens},
                 {"tokens_per_second", tokens / std::max(seconds, 1e-9)}, {"step_seconds", seconds}});
  if (run.objective) record.update(run.objective->step_metrics());  // surogate dpo: TRL's metric names
  if (outcome.metrics.router_aux_loss) {  // MoE: the mean of the micro-batches' load-balancing losses
    record["router_aux_loss"] = *outcome.metrics.router_aux_loss / static_cast<double>(window.size);  // every rank's
  }
  run.state.history.push_back(record);
  run.log("step", record);
  if (run.guard->diverged(run.state)) fail_diverged(run, outcome.verdict);
  log_saved(run, run.writer->poll());
  if (run.gpu_log && run.gpu_log->due(run.state.step)) {  // rank 0's process only
    nlohmann::json sample = run.gpu_log->sample(run.state.step);
    run.state.gpu_history.push_back(sample);
    run.log("gpu", sample);
  }
  run.result.step_losses.push_back(loss);
  if (!run.options.quiet) {
    run.display.step({run.state.step, run.state.total_steps, epoch, loss, outcome.learning_rate, grad_norm,
                      tokens / std::max(seconds, 1e-9),
                      timing.total_seconds / static_cast<double>(timing.steps) *
                          static_cast<double>(run.state.total_steps - run.state.step)});
  }
}

// After a step: evaluation and checkpoint at their cadence, injected faults; whether the run
// stops here (stop_after_step, or the caller's stop_requested).
enum class AfterStep { Continue, StopAfterStep, StopRequested };

AfterStep step_cadence(RunContext& run) {
  const Config& config = run.config;
  if (config.eval.eval_steps > 0 && run.state.step % config.eval.eval_steps == 0 &&
      run.state.step < run.state.total_steps) {
    evaluate(run, false);
  }
  if (config.checkpoint.save_steps > 0 && run.state.step % config.checkpoint.save_steps == 0) save_checkpoint(run);
  inject_faults_after_step(run.options.faults, run.state.step);
  if (run.options.stop_after_step && run.state.step == *run.options.stop_after_step) return AfterStep::StopAfterStep;
  if (run.options.stop_requested && run.state.step < run.state.total_steps && run.options.stop_requested()) {
    return AfterStep::StopRequested;
  }
  return AfterStep::Continue;
}

// Stopped right after a step (TrainerOptions::stop_after_step), exactly as if killed there.
void stop_after_step(RunContext& run) {
  run.display.finish();
  log_saved(run, run.writer->wait());
  report_time_breakdown(run);
  run.result.steps = run.state.step;
}

}  // namespace

TrainingResult run_steps(RunContext& run) {
  const RunClock::time_point start = RunClock::now();
  run.startup.end_phase("setup");
  if (run.state.step == 0) {
    evaluate(run, false);
    run.startup.end_phase("first eval");
  }
  StartupSummary startup = startup_summary(run.startup.phases, seconds_since(run.startup.started));
  run.log("startup", std::move(startup.record));
  run.message(startup.line);
  StepWindow window = make_window(run);
  StepTiming timing;
  while (run.state.step < run.state.total_steps) {
    const RunClock::time_point step_start = RunClock::now();
    HostPhases host;
    take_window(run, window);
    host.end("read micro-batches");
    StepOutcome outcome = train_step(run, window, host);
    record_step(run, window, outcome, seconds_since(step_start), timing);
    host.end("record");
    if (run.config.logging.debug_time_breakdown) run.host_phases.add(host.milliseconds);
    const AfterStep after = step_cadence(run);
    if (after == AfterStep::Continue) continue;
    if (after == AfterStep::StopAfterStep) stop_after_step(run);
    if (after == AfterStep::StopRequested) stop_early(run);
    run.result.seconds = seconds_since(start);
    return run.result;
  }
  finish_run(run, start);
  return run.result;
}

}  // namespace surogate::train
