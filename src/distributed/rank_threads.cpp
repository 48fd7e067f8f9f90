// Rank threads; see rank_threads.h.
#include "distributed/rank_threads.h"

#include "core/error.h"

namespace surogate::distributed {

RankThreads::RankThreads(int world_size) : failure_hooks_(static_cast<size_t>(world_size)) {
  SUROGATE_CHECK(world_size >= 1, "a world has at least one rank");
  for (int rank = 0; rank < world_size; ++rank) threads_.emplace_back([this, rank] { serve(rank); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void RankThreads::run(const std::function<void(int)>& task) {
  std::unique_lock lock(mutex_);
  task_ = &task;
  error_ = nullptr;
  running_ = world_size();
  ++generation_;
  start_.notify_all();
  done_.wait(lock, [this] { return running_ == 0; });
  task_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void RankThreads::serve(int rank) {
  uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const std::function<void(int)>* task = task_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*task)(rank);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) {
      // Recorded first, so that run() rethrows this error, not a peer's failure the hooks cause.
      if (!error_) error_ = error;
      const std::vector<std::function<void(const std::exception_ptr&)>> hooks = failure_hooks_[static_cast<size_t>(rank)];
      lock.unlock();
      for (const auto& hook : hooks) hook(error);
      lock.lock();
    }
    if (--running_ == 0) done_.notify_all();
  }
}

void RankThreads::on_failure(int rank, std::function<void(const std::exception_ptr&)> hook) {
  SUROGATE_CHECK(rank >= 0 && rank < world_size(), "a rank of these threads");
  std::lock_guard lock(mutex_);
  failure_hooks_[static_cast<size_t>(rank)].push_back(std::move(hook));
}

}  // namespace surogate::distributed
