// debug_time_breakdown's tally; see time_breakdown.h.
#include "train/observe/time_breakdown.h"

#include <algorithm>

#include <fmt/format.h>

#include "train/observe/progress_display.h"

namespace surogate::train {

void TimeBreakdown::add(const std::vector<std::pair<std::string, double>>& breakdown) {
  if (breakdown.empty()) return;
  std::map<std::string, double>& tally = has_warm_up_ ? milliseconds_ : warm_up_;
  for (const auto& [op, ms] : breakdown) tally[op] += ms;
  if (has_warm_up_) ++samples_;
  has_warm_up_ = true;
}

std::vector<std::pair<std::string, double>> TimeBreakdown::mean() const {
  const std::map<std::string, double>& tally = samples_ > 0 ? milliseconds_ : warm_up_;
  const double count = samples_ > 0 ? static_cast<double>(samples_) : 1.0;
  std::vector<std::pair<std::string, double>> mean;
  for (const auto& [op, ms] : tally) mean.emplace_back(op, ms / count);
  std::sort(mean.begin(), mean.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return mean;
}

std::string TimeBreakdown::averaged_over() const {
  if (samples_ == 0) return "the first step only, its warm-up included";
  return fmt::format("{} step{} after the first, its warm-up left out", samples_, samples_ == 1 ? "" : "s");
}

nlohmann::json TimeBreakdown::record() const {
  double total = 0.0;
  for (const auto& [op, ms] : mean()) total += ms;
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& [op, ms] : mean()) ops.push_back({{"op", op}, {"ms", ms}, {"percent", total > 0.0 ? 100.0 * ms / total : 0.0}});
  return {{"micro_batches", samples_ > 0 ? samples_ : 1}, {"warm_up_left_out", samples_ > 0}, {"total_ms", total}, {"ops", ops}};
}

std::string TimeBreakdown::table() const {
  return table("time per micro-batch (each step's last)", "ms");
}

std::string TimeBreakdown::table(std::string_view title, std::string_view unit) const {
  double total = 0.0;
  for (const auto& [op, ms] : mean()) total += ms;
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& [op, ms] : mean()) {
    rows.emplace_back(op, fmt::format("{:9.3f} {} {:5.1f}%", ms, unit, total > 0.0 ? 100.0 * ms / total : 0.0));
  }
  rows.emplace_back("total", fmt::format("{:9.3f} {}", total, unit));
  return format_summary_table(fmt::format("{}: mean of {}", title, averaged_over()), rows);
}

}  // namespace surogate::train
