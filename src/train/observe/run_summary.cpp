// A run's summary rows; see run_summary.h.
#include "train/observe/run_summary.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "train/observe/gpu_utilization.h"
#include "train/model_outputs.h"
#include "train/observe/progress_display.h"

namespace surogate::train {

SummaryRows run_summary_rows(const RunSummary& run) {
  const Config& config = *run.config;
  const TrainingState& state = *run.state;
  const TrainingResult& result = *run.result;
  SummaryRows rows;
  rows.emplace_back("steps", fmt::format("{} (this run: {})", state.step, state.step - result.first_step));
  const nlohmann::json* first = nullptr;
  const nlohmann::json* last = nullptr;
  for (const nlohmann::json& record : state.history) {
    if (!record.contains("loss") || !record["loss"].is_number()) continue;  // a skipped step's loss is null
    if (first == nullptr) first = &record;
    last = &record;
  }
  if (first != nullptr) {
    rows.emplace_back("first step loss", fmt::format("{:.4f}", (*first)["loss"].get<double>()));
    rows.emplace_back("last step loss", fmt::format("{:.4f}", (*last)["loss"].get<double>()));
  }
  for (const auto& row : run.guard_rows) rows.push_back(row);
  if (!run.restarts.empty()) {
    std::string text = std::to_string(run.restarts.size());
    for (const RestartRecord& restart : run.restarts) {
      text += fmt::format("{} {}: {}", &restart == &run.restarts.front() ? " —" : ";", restart.attempt, restart.reason);
    }
    rows.emplace_back("restarts", text + fmt::format(" (the last resumed at step {})", result.first_step));
  }
  if (result.initial_eval_loss) rows.emplace_back("eval loss before training", fmt::format("{:.4f}", *result.initial_eval_loss));
  if (result.eval_loss) {
    rows.emplace_back("final eval loss", fmt::format("{:.4f}", *result.eval_loss));
    if (config.grpo.enabled) {  // surogate grpo: the validation completions' mean reward (grpo_evaluation.h)
      const nlohmann::json& last = state.eval_history.empty() ? nlohmann::json() : state.eval_history.back();
      if (last.is_object() && last.contains("eval_reward") && last["eval_reward"].is_number())
        rows.emplace_back("final eval reward", fmt::format("{:.4f}", last["eval_reward"].get<double>()));
    } else if (config.loss.preference) {  // surogate dpo: eval_accuracy is the pairs' reward accuracy
      rows.emplace_back("final eval reward accuracy", fmt::format("{:.1f}%", 100.0 * *result.eval_accuracy));
    } else {
      rows.emplace_back("final eval token accuracy",
                        fmt::format("{:.1f}% (chance {:.1f}%)", 100.0 * *result.eval_accuracy,
                                    100.0 / static_cast<double>(run.vocab_size)));
    }
  }
  rows.emplace_back("time", format_duration(result.seconds));
  for (auto& row : gpu_summary_rows(state.gpu_history)) rows.push_back(std::move(row));
  if (run.lora) {
    rows.emplace_back("adapter (PEFT)", config.run.output_dir);
    if (config.lora.merge_adapter) rows.emplace_back("merged model", merged_model_dir(config.run.output_dir).string());
  } else {
    rows.emplace_back("model", config.run.output_dir);
  }
  rows.emplace_back("checkpoints", config.checkpoint.checkpoint_dir.value_or(config.run.output_dir));
  rows.emplace_back("log", result.log_file.string());
  rows.emplace_back(
      "report", (std::filesystem::path(config.run.output_dir) / fmt::format("report-{}.html", run.run_name)).string());
  return rows;
}

StartupSummary startup_summary(std::span<const std::pair<std::string, double>> phases, double total_seconds) {
  StartupSummary summary{{{"total_seconds", total_seconds}}, {}};
  std::string line;
  for (const auto& [phase, seconds] : phases) {
    summary.record[phase] = seconds;
    if (seconds >= 0.05) line += fmt::format("{}{} {:.1f} s", line.empty() ? "" : ", ", phase, seconds);
  }
  summary.line = fmt::format("start-up {:.1f} s{}", total_seconds, line.empty() ? "" : " (" + line + ")");
  return summary;
}

}  // namespace surogate::train
