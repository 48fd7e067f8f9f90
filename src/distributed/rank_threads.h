// One thread per rank, for worlds whose ranks live in this process (CPU ranks, and one thread
// per GPU, as the reference drives its GPUs). run(task) calls task(rank) on every rank's
// thread at once and returns when all have finished; the first exception thrown by a rank is
// rethrown on the caller's thread. Collectives are called from inside tasks, so every rank must
// reach the same collectives. A rank whose task throws runs its failure hooks (on_failure) on its
// own thread, after its error is recorded: a gloo communicator closes its connections there, so
// that a peer waiting for it fails at once (RankFailure), as when a process of the run dies.
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
  // Adds `hook` to what rank `rank`'s thread runs when one of its tasks throws (the error given);
  // hooks must not throw. Callable from inside a task (the communicators' connect functions).
  void on_failure(int rank, std::function<void(const std::exception_ptr&)> hook);

private:
  void serve(int rank);

  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* task_ = nullptr;
  uint64_t generation_ = 0;  // bumped by each run(); a rank runs each generation once
  int running_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::vector<std::vector<std::function<void(const std::exception_ptr&)>>> failure_hooks_;  // by rank
  std::vector<std::thread> threads_;
};

}  // namespace surogate::distributed
