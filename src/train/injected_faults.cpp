// Test-injected failures; see injected_faults.h.
#include "train/injected_faults.h"

#include <csignal>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::train {

InjectedFaults injected_faults_from_text(const std::string& text, size_t attempt) {
  InjectedFaults faults;
  bool every_attempt = false;
  std::string rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string item = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const size_t equals = item.find('=');
    int64_t value = -1;
    try {
      if (equals != std::string::npos) value = std::stoll(item.substr(equals + 1));
    } catch (const std::exception&) {
      value = -1;
    }
    const std::string key = item.substr(0, equals);
    if (value < 0) fail_user("SUROGATE_TEST_FAULTS: '{}' is not key=non-negative-integer", item);
    if (key == "checkpoint_write_delay_ms") faults.checkpoint_write_delay = std::chrono::milliseconds(value);
    else if (key == "crash_after_step") faults.crash_after_step = value;
    else if (key == "error_after_step") faults.error_after_step = value;
    else if (key == "nonfinite_loss_at_step") faults.nonfinite_loss_at_step = value;
    else if (key == "nonfinite_loss_from_step") faults.nonfinite_loss_from_step = value;
    else if (key == "every_attempt") every_attempt = value != 0;
    else fail_user("SUROGATE_TEST_FAULTS: unknown fault '{}' (checkpoint_write_delay_ms, crash_after_step, "
                   "error_after_step, nonfinite_loss_at_step, nonfinite_loss_from_step, every_attempt)", key);
  }
  return attempt == 0 || every_attempt ? faults : InjectedFaults{};
}

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
