// Every process's per-micro-batch rows in window order; see process_window_rows.h.
#include "train/objective/process_window_rows.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace surogate::train {

std::vector<std::vector<double>> window_rows(distributed::ProcessWorld* world,
                                             const std::vector<std::pair<int64_t, std::vector<double>>>& mine) {
  std::map<int64_t, std::vector<double>> ordered;
  if (world == nullptr || world->alone()) {
    for (const auto& [index, row] : mine) ordered.emplace(index, row);
  } else {
    const size_t width = mine.empty() ? 0 : mine.front().second.size();
    std::vector<double> flat;  // per micro-batch: its index, then its row
    for (const auto& [index, row] : mine) {
      SUROGATE_CHECK(row.size() == width, "window rows of one width ({} and {})", row.size(), width);
      flat.push_back(static_cast<double>(index));
      flat.insert(flat.end(), row.begin(), row.end());
    }
    const std::vector<double> all = world->all_gather(flat);
    SUROGATE_CHECK(all.size() % (width + 1) == 0, "whole window rows from every process");
    for (size_t at = 0; at < all.size(); at += width + 1) {
      ordered.emplace(static_cast<int64_t>(all[at]),
                      std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(at + 1),
                                          all.begin() + static_cast<std::ptrdiff_t>(at + 1 + width)));
    }
  }
  std::vector<std::vector<double>> rows;
  rows.reserve(ordered.size());
  for (auto& [index, row] : ordered) rows.push_back(std::move(row));
  return rows;
}

}  // namespace surogate::train
