// A minimal parallel-for for the CPU reference ops: splits [0, count) into one contiguous
// block per hardware thread and runs `body(index)` for every index. The ops that use it
// (attention, cross-entropy) give each index exclusive ownership of its output rows, so the
// result does not depend on the thread count: the reference stays deterministic. The first
// exception thrown by any worker is rethrown on the calling thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace surogate::ops {

inline int64_t parallel_thread_count() {
  unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int64_t>(hardware);
}

template <typename Body>
void parallel_for(int64_t count, Body&& body) {
  if (count <= 0) return;
  const int64_t thread_count = std::min(parallel_thread_count(), count);
  if (thread_count == 1) {
    for (int64_t index = 0; index < count; ++index) body(index);
    return;
  }
  std::exception_ptr first_error;
  std::mutex error_mutex;
  auto run_block = [&](int64_t block) {
    const int64_t begin = count * block / thread_count;
    const int64_t end = count * (block + 1) / thread_count;
    try {
      for (int64_t index = begin; index < end; ++index) body(index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(thread_count - 1));
  for (int64_t block = 1; block < thread_count; ++block) workers.emplace_back(run_block, block);
  run_block(0);
  for (std::thread& worker : workers) worker.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace surogate::ops
