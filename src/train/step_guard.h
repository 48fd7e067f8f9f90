// What happens to a step whose numbers are not finite, kept out of the step loop
// (train/run/step_loop.cpp):
//   - a step with a non-finite loss or gradient norm is skipped: nothing is applied (the device's
//     skip_update()), the step record says so, and the run goes on; more than max_nonfinite_steps
//     in a row and the run has diverged (the trainer raises TrainingDiverged);
//   - fp16 (torch_dtype: float16) runs the loss scaled by the dynamic loss scale
//     (train/fp16_loss_scaler.h): the step's loss and norm are unscaled here, the update divides
//     the gradients by the scale, and a step whose gradients overflowed at a scale above 1 is
//     skipped as part of the scaling (the scale halves), not counted as non-finite.
// The counters and the scaler's state live in the TrainingState, so checkpoints carry them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/sections/precision.h"
#include "config/sections/run.h"
#include "train/fp16_loss_scaler.h"
#include "train/training_state.h"

namespace surogate::train {

struct StepVerdict {
  double loss = 0.0;       // unscaled
  double grad_norm = 0.0;  // unscaled
  double gradient_scale = 1.0;  // what the update multiplies the gradients by (1 / the loss scale)
  bool apply = true;
  bool overflow = false;               // fp16: skipped for the loss scale
  std::optional<std::string> nonfinite;  // "loss" / "gradient norm" when not applied
};

class StepGuard {
public:
  // `run`: max_nonfinite_steps. fp16: with the loss scaler of `precision` (fp16_loss_scale,
  // fp16_loss_scale_window; its state restored from `state` when it holds one).
  StepGuard(const config::Run& run, const config::Precision& precision, bool fp16, TrainingState& state);

  // The factor the step's loss is multiplied by (the loss scale; 1 without fp16).
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  // Restores the scaler from a resumed state.
  void resume(TrainingState& state);

  // The fate of the step just measured (its summed loss and norm at loss_scale()); updates the
  // state's counters and scaler, and writes into `record` what the step record says about it.
  StepVerdict judge(double scaled_loss, double scaled_grad_norm, TrainingState& state, nlohmann::json& record);
  // A line for the step that was not applied, or nothing.
  std::optional<std::string> message(const StepVerdict& verdict, const TrainingState& state) const;
  // More than max_nonfinite_steps in a row.
  bool diverged(const TrainingState& state) const { return state.consecutive_nonfinite_steps > max_nonfinite_steps_; }
  std::string divergence(const StepVerdict& verdict, const TrainingState& state, const std::string& last_checkpoint) const;

  std::vector<std::pair<std::string, std::string>> summary_rows(const TrainingState& state) const;

private:
  int64_t max_nonfinite_steps_;
  std::optional<Fp16LossScaler> scaler_;
};

}  // namespace surogate::train
