// debug_time_breakdown's tally; see time_breakdown.h.
#include "train/observe/time_breakdown.h"

#include <algorithm>

#include <fmt/format.h>

#include "train/observe/progress_display.h"

namespace surogate::train {

void TimeBreakdown::add(const std::vector<std::pair<std::string, double>>& breakdown) {
  if (breakdown.empty()) return;
  for (const auto& [op, ms] : breakdown) milliseconds_[op] += ms;
  ++samples_;
}

std::vector<std::pair<std::string, double>> TimeBreakdown::mean() const {
  std::vector<std::pair<std::string, double>> mean;
  for (const auto& [op, ms] : milliseconds_) mean.emplace_back(op, ms / static_cast<double>(samples_));
  std::sort(mean.begin(), mean.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return mean;
}

nlohmann::json TimeBreakdown::record() const {
  double total = 0.0;
  for (const auto& [op, ms] : mean()) total += ms;
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& [op, ms] : mean()) ops.push_back({{"op", op}, {"ms", ms}, {"percent", total > 0.0 ? 100.0 * ms / total : 0.0}});
  return {{"micro_batches", samples_}, {"total_ms", total}, {"ops", ops}};
}

std::string TimeBreakdown::table() const {
  return table(fmt::format("time per micro-batch (mean of {} steps' last micro-batch)", samples_), "ms");
}

std::string TimeBreakdown::table(std::string_view title, std::string_view unit) const {
  double total = 0.0;
  for (const auto& [op, ms] : mean()) total += ms;
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& [op, ms] : mean()) {
    rows.emplace_back(op, fmt::format("{:9.3f} {} {:5.1f}%", ms, unit, total > 0.0 ? 100.0 * ms / total : 0.0));
  }
  rows.emplace_back("total", fmt::format("{:9.3f} {}", total, unit));
  return format_summary_table(std::string(title), rows);
}

}  // namespace surogate::train
