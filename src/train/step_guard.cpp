// Skipped steps and fp16 loss scaling; see step_guard.h.
#include "train/step_guard.h"

#include <cmath>

#include <fmt/format.h>

namespace surogate::train {

StepGuard::StepGuard(const config::Run& run, const config::Precision& precision, bool fp16, TrainingState& state)
    : max_nonfinite_steps_(run.max_nonfinite_steps) {
  if (!fp16) return;
  scaler_.emplace(precision.fp16_loss_scale, precision.fp16_loss_scale_window);
  state.loss_scale = scaler_->to_json();
}

void StepGuard::resume(TrainingState& state) {
  if (!scaler_) return;
  scaler_->restore(state.loss_scale);
  state.loss_scale = scaler_->to_json();
}

StepVerdict StepGuard::judge(double scaled_loss, double scaled_grad_norm, TrainingState& state,
                             nlohmann::json& record) {
  const double scale = loss_scale();
  StepVerdict verdict;
  verdict.loss = scaled_loss / scale;
  verdict.grad_norm = scaled_grad_norm / scale;
  verdict.gradient_scale = 1.0 / scale;
  const bool finite_loss = std::isfinite(verdict.loss);
  verdict.apply = finite_loss && std::isfinite(verdict.grad_norm);
  // fp16: a finite loss with overflowed gradients means the scale was too high (unless it is 1).
  verdict.overflow = scaler_ && !verdict.apply && finite_loss && !scaler_->at_minimum();
  if (scaler_) {
    record["loss_scale"] = scale;
    if (finite_loss) scaler_->update(verdict.apply);
    state.loss_scale = scaler_->to_json();
  }
  if (verdict.apply) {
    state.consecutive_nonfinite_steps = 0;
    return verdict;
  }
  verdict.nonfinite = finite_loss ? "gradient norm" : "loss";
  ++state.skipped_steps;
  if (!verdict.overflow) ++state.consecutive_nonfinite_steps;
  record["skipped"] = true;
  record["nonfinite"] = *verdict.nonfinite;
  if (verdict.overflow) record["loss_scale_overflow"] = true;
  return verdict;
}

std::optional<std::string> StepGuard::message(const StepVerdict& verdict, const TrainingState& state) const {
  if (verdict.apply) return std::nullopt;
  if (verdict.overflow) {
    return fmt::format("step {} skipped: fp16 gradients overflowed at loss scale {}; the scale is now {}", state.step,
                       1.0 / verdict.gradient_scale, scaler_->scale());
  }
  const double value = *verdict.nonfinite == "loss" ? verdict.loss : verdict.grad_norm;
  return fmt::format("step {} skipped: the {} is {} (nothing applied; {} in a row, max_nonfinite_steps: {})",
                     state.step, *verdict.nonfinite, value, state.consecutive_nonfinite_steps, max_nonfinite_steps_);
}

std::string StepGuard::divergence(const StepVerdict& verdict, const TrainingState& state,
                                  const std::string& last_checkpoint) const {
  const double value = verdict.nonfinite == "loss" ? verdict.loss : verdict.grad_norm;
  return fmt::format(
      "training diverged at step {}: the {} is {} ({} non-finite step{} in a row; max_nonfinite_steps: {}). The last "
      "good checkpoint is {}. Lower learning_rate, raise warmup_steps or set max_grad_norm, then resume "
      "(resume_from_checkpoint: true)",
      state.step, verdict.nonfinite.value_or("loss"), value, state.consecutive_nonfinite_steps,
      state.consecutive_nonfinite_steps == 1 ? "" : "s", max_nonfinite_steps_, last_checkpoint);
}

std::vector<std::pair<std::string, std::string>> StepGuard::summary_rows(const TrainingState& state) const {
  std::vector<std::pair<std::string, std::string>> rows;
  if (state.skipped_steps > 0) {
    rows.emplace_back("skipped steps", fmt::format("{} (non-finite loss or gradient, nothing applied)", state.skipped_steps));
  }
  if (scaler_) {
    rows.emplace_back("fp16 loss scale", fmt::format("{} at the end; {} step{} skipped for overflowed gradients",
                                                     scaler_->scale(), scaler_->overflows(),
                                                     scaler_->overflows() == 1 ? "" : "s"));
  }
  return rows;
}

}  // namespace surogate::train
