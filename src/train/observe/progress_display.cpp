// Progress line and summary table; see progress_display.h.
#include "train/observe/progress_display.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace surogate::train {

ProgressDisplay::ProgressDisplay(bool live, bool silent) : live_(live), silent_(silent) {}

bool ProgressDisplay::stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

std::string format_duration(double seconds) {
  auto total = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  if (total >= 3600) return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
  if (total >= 60) return fmt::format("{}m{:02}s", total / 60, total % 60);
  return fmt::format("{}s", total);
}

void ProgressDisplay::step(const StepReport& r) {
  if (silent_) return;
  std::string line = fmt::format("step {}/{} | epoch {:.2f} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | ETA {}",
                                 r.step, r.total_steps, r.epoch, r.loss, r.learning_rate, r.grad_norm,
                                 r.tokens_per_second, format_duration(r.eta_seconds));
  if (live_) {
    fmt::print("\r\033[2K{}", line);
    line_open_ = true;
  } else {
    fmt::print("{}\n", line);
  }
  std::fflush(stdout);
}

void ProgressDisplay::message(const std::string& line) {
  if (silent_) return;
  if (line_open_) fmt::print("\n");
  line_open_ = false;
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

void ProgressDisplay::finish() {
  if (line_open_) fmt::print("\n");
  line_open_ = false;
  std::fflush(stdout);
}

std::string format_summary_table(const std::string& title, const std::vector<std::pair<std::string, std::string>>& rows) {
  size_t key_width = 0, value_width = title.size();
  for (const auto& [key, value] : rows) {
    key_width = std::max(key_width, key.size());
    value_width = std::max(value_width, key_width + 3 + value.size());
  }
  for (const auto& [key, value] : rows) value_width = std::max(value_width, key_width + 3 + value.size());
  std::string text = fmt::format("+{}+\n| {:<{}} |\n+{}+\n", std::string(value_width + 2, '-'), title, value_width,
                                 std::string(value_width + 2, '-'));
  for (const auto& [key, value] : rows) {
    text += fmt::format("| {:<{}} | {:<{}} |\n", key, key_width, value, value_width - key_width - 3);
  }
  text += fmt::format("+{}+\n", std::string(value_width + 2, '-'));
  return text;
}

}  // namespace surogate::train
