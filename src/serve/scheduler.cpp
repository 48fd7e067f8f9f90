// The per-model scheduler thread (scheduler.h).
#include "serve/scheduler.h"

#include <stdexcept>

#include "core/error.h"

namespace surogate::serve {

void RequestChannel::push(ChoiceEvent event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_all();
}

void RequestChannel::fail(const std::string& message) {
  {
    std::lock_guard lock(mutex_);
    if (!failure_) failure_ = message;
  }
  ready_.notify_all();
}

std::vector<ChoiceEvent> RequestChannel::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [this] { return !events_.empty() || failure_.has_value(); });
  if (failure_) throw std::runtime_error(*failure_);
  std::vector<ChoiceEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

ModelScheduler::ModelScheduler(std::unique_ptr<generate::NextTokenModel> model, const tokenizer::Tokenizer* tokenizer)
    : model_(std::move(model)), tokenizer_(tokenizer), engine_(*model_, tokenizer), thread_([this] { run(); }) {}

ModelScheduler::~ModelScheduler() { stop(); }

std::vector<uint64_t> ModelScheduler::submit(std::span<const generate::GenerationRequest> requests,
                                             std::optional<int64_t> top_logprobs,
                                             std::shared_ptr<RequestChannel> channel) {
  for (const generate::GenerationRequest& request : requests) {
    generate::check_request(request, "request", *model_, tokenizer_);  // model sizes only: no lock needed
  }
  std::vector<uint64_t> ids;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw std::runtime_error("the server is shutting down");
    for (size_t choice = 0; choice < requests.size(); ++choice) {
      // The id is known only after submit; the sink reads it from the shared slot.
      auto id = std::make_shared<uint64_t>(0);
      const uint64_t assigned = engine_.submit(
          requests[choice],
          [this, channel, choice, id](const generate::TokenEvent& event) {
            channel->push({static_cast<int64_t>(choice), event});
            if (event.finish) live_.erase(*id);  // on the scheduler thread, under mutex_
          },
          top_logprobs);
      *id = assigned;
      live_[assigned] = channel;
      ids.push_back(assigned);
    }
  }
  work_.notify_one();
  return ids;
}

void ModelScheduler::cancel(std::span<const uint64_t> ids) {
  std::lock_guard lock(mutex_);
  for (uint64_t id : ids) {
    if (live_.erase(id) > 0) engine_.cancel(id);
  }
}

void ModelScheduler::fail_all(const std::string& why) {
  for (auto& [id, channel] : live_) channel->fail(why);
  live_.clear();
  engine_.clear();
}

void ModelScheduler::stop(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      stopping_ = true;
      fail_all(why);
    }
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ModelScheduler::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    work_.wait(lock, [this] { return stopping_ || engine_.has_work(); });
    if (stopping_) return;
    try {
      engine_.step();
    } catch (const std::exception& error) {
      // The engine dropped every sequence; their requests fail, the server goes on.
      fail_all(std::string("generation failed: ") + error.what());
    }
    // Let waiting submits and cancels in between steps.
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
}

}  // namespace surogate::serve
