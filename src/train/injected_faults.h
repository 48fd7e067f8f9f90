// Failures injected by tests into a training run, to exercise recovery: the checkpoint writer
// slowed (so a test can kill the process mid-write), the process killed or an internal error
// thrown after a step, and losses that read NaN. The CLI reads them from SUROGATE_TEST_FAULTS
// (src/cli/command_train.cpp); C++ tests set TrainerOptions::faults. Nothing else sets them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace surogate::train {

struct InjectedFaults {
  std::chrono::milliseconds checkpoint_write_delay{0};  // the writer sleeps before the manifest
  std::optional<int64_t> crash_after_step;              // the process kills itself (SIGKILL)
  std::optional<int64_t> error_after_step;              // an internal error is thrown (as a CUDA error would be)
  std::optional<int64_t> nonfinite_loss_at_step;        // this step's loss reads NaN
  std::optional<int64_t> nonfinite_loss_from_step;      // this step's and every later step's loss reads NaN
};

// From SUROGATE_TEST_FAULTS' text: "key=value,key=value" with the keys checkpoint_write_delay_ms,
// crash_after_step, error_after_step, nonfinite_loss_at_step, nonfinite_loss_from_step, and
// every_attempt=1 (a supervised run's restarts see them too; by default only its first attempt,
// `attempt` 0, does). A malformed item is a UserError naming it.
InjectedFaults injected_faults_from_text(const std::string& text, size_t attempt);

// The loss step `step` (1-based) reports: NaN where a fault says so, else `loss`.
double injected_loss(const InjectedFaults& faults, int64_t step, double loss);

// After step `step` (and its checkpoint's start): kills the process or throws, where a fault says so.
void inject_faults_after_step(const InjectedFaults& faults, int64_t step);

}  // namespace surogate::train
