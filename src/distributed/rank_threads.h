// One thread per rank, for worlds whose ranks live in this process (CPU ranks, and one thread
// per GPU, as the reference drives its GPUs). run(task) calls task(rank) on every rank's
// thread at once and returns when all have finished; the first exception thrown by a rank is
// rethrown on the caller's thread. Collectives are called from inside tasks, so every rank must
// reach the same collectives: a task that can fail does so before its first collective.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace surogate::distributed {

class RankThreads {
public:
  explicit RankThreads(int world_size);
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int world_size() const { return static_cast<int>(threads_.size()); }
  void run(const std::function<void(int rank)>& task);

private:
  void serve(int rank);

  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* task_ = nullptr;
  uint64_t generation_ = 0;  // bumped by each run(); a rank runs each generation once
  int running_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace surogate::distributed
