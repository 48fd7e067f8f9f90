// The per-model scheduler thread (scheduler.h).
#include "serve/scheduler.h"

#include <algorithm>
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

ModelScheduler::ModelScheduler(std::unique_ptr<generate::NextTokenModel> model, const tokenizer::Tokenizer* tokenizer,
                               int64_t max_prefill_tokens)
    : model_(std::move(model)),
      tokenizer_(tokenizer),
      engine_(*model_, tokenizer, max_prefill_tokens),
      thread_([this] { run(); }) {}

ModelScheduler::~ModelScheduler() { stop(); }

std::vector<uint64_t> ModelScheduler::submit(std::span<const generate::GenerationRequest> requests,
                                             std::optional<int64_t> top_logprobs,
                                             std::shared_ptr<RequestChannel> channel) {
  for (const generate::GenerationRequest& request : requests) {
    generate::check_request(request, "request", *model_, tokenizer_);  // model sizes only: no lock needed
  }
  std::vector<uint64_t> tickets;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw std::runtime_error("the server is shutting down");
    for (size_t choice = 0; choice < requests.size(); ++choice) {
      const uint64_t ticket = next_ticket_++;
      pending_.push_back({ticket, requests[choice], top_logprobs, channel, static_cast<int64_t>(choice)});
      live_[ticket] = channel;
      tickets.push_back(ticket);
    }
  }
  work_.notify_one();
  return tickets;
}

void ModelScheduler::cancel(std::span<const uint64_t> tickets) {
  {
    std::lock_guard lock(mutex_);
    for (uint64_t ticket : tickets) {
      if (live_.erase(ticket) == 0) continue;  // finished already
      const auto queued = std::find_if(pending_.begin(), pending_.end(),
                                       [ticket](const Pending& pending) { return pending.ticket == ticket; });
      if (queued != pending_.end()) {
        pending_.erase(queued);
      } else {
        cancels_.push_back(ticket);
      }
    }
  }
  work_.notify_one();
}

void ModelScheduler::fail_live(const std::string& why) {
  std::lock_guard lock(mutex_);
  for (auto& [ticket, channel] : live_) channel->fail(why);
  live_.clear();
  pending_.clear();
  cancels_.clear();
}

void ModelScheduler::stop(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  fail_live(why);
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ModelScheduler::take_in() {
  std::vector<Pending> pending;
  std::vector<uint64_t> cancels;
  {
    std::lock_guard lock(mutex_);
    pending.swap(pending_);
    cancels.swap(cancels_);
  }
  for (uint64_t ticket : cancels) {
    const auto found = engine_ids_.find(ticket);
    if (found == engine_ids_.end()) continue;
    engine_.cancel(found->second);
    engine_ids_.erase(found);
  }
  for (Pending& item : pending) {
    const uint64_t ticket = item.ticket;
    std::shared_ptr<RequestChannel> channel = item.channel;
    const int64_t choice = item.choice;
    engine_ids_[ticket] = engine_.submit(
        item.request,
        [this, ticket, channel, choice](const generate::TokenEvent& event) {
          channel->push({choice, event});
          if (event.finish) {
            engine_ids_.erase(ticket);  // on the scheduler thread, inside step()
            std::lock_guard lock(mutex_);
            live_.erase(ticket);
          }
        },
        item.top_logprobs);
  }
}

void ModelScheduler::run() {
  while (true) {
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [this] { return stopping_ || !pending_.empty() || !cancels_.empty() || engine_.has_work(); });
      if (stopping_) break;
    }
    take_in();
    try {
      engine_.step();
    } catch (const std::exception& error) {
      // The engine dropped every sequence; their requests fail (not those queued since), the server goes on.
      std::lock_guard lock(mutex_);
      for (const auto& [ticket, id] : engine_ids_) {
        const auto found = live_.find(ticket);
        if (found == live_.end()) continue;
        found->second->fail(std::string("generation failed: ") + error.what());
        live_.erase(found);
      }
      engine_ids_.clear();
    }
  }
  engine_.clear();
}

}  // namespace surogate::serve
