// Test-injected failures; see injected_faults.h.
#include "train/injected_faults.h"

#include <csignal>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace surogate::train {

double injected_loss(const InjectedFaults& faults, int64_t step, double loss) {
  if ((faults.nonfinite_loss_at_step && step == *faults.nonfinite_loss_at_step) ||
      (faults.nonfinite_loss_from_step && step >= *faults.nonfinite_loss_from_step)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return loss;
}

void inject_faults_after_step(const InjectedFaults& faults, int64_t step) {
  if (faults.crash_after_step && step == *faults.crash_after_step) std::raise(SIGKILL);
  if (faults.error_after_step && step == *faults.error_after_step) {
    throw std::runtime_error(fmt::format("injected failure after step {} (SUROGATE_TEST_FAULTS)", step));
  }
}

}  // namespace surogate::train
