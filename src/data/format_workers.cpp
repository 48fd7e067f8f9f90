// Formatting rows on several threads; see format_workers.h.
#include "data/format_workers.h"

#include <algorithm>
#include <exception>
#include <thread>

namespace surogate::data {

size_t format_worker_count(const std::optional<int64_t>& dataloader_num_workers) {
  if (!dataloader_num_workers) return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  return static_cast<size_t>(std::max<int64_t>(1, *dataloader_num_workers));
}

std::vector<FormattedRow> format_rows(const Formatter& formatter, const std::vector<Row>& rows, size_t workers) {
  std::vector<FormattedRow> results(rows.size());
  std::vector<std::exception_ptr> errors(rows.size());
  // Worker w formats rows w, w + n, w + 2n, ...: each row's result lands in its own slot.
  auto work = [&](size_t first, size_t stride) {
    Formatter own = formatter;
    for (size_t i = first; i < rows.size(); i += stride) {
      try {
        results[i] = own.format(rows[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const size_t threads = std::min(workers, rows.size());
  if (threads <= 1) {
    work(0, 1);
  } else {
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (size_t w = 0; w < threads; ++w) pool.emplace_back(work, w, threads);
    for (std::thread& thread : pool) thread.join();
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return results;
}

}  // namespace surogate::data
