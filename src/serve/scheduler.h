// One thread per loaded model that drives its GenerationEngine: while sequences wait or run it
// calls step(), otherwise it sleeps on a condition variable until a request comes. HTTP threads
// submit the sequences of a request with a RequestChannel and read their tokens from it as the
// scheduler thread pushes them. The engine is touched only under the scheduler's lock (a submit
// or cancel waits at most one step).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "generate/engine.h"
#include "generate/next_token_model.h"

namespace surogate::serve {

// A token of choice `choice` of a request.
struct ChoiceEvent {
  int64_t choice = 0;
  generate::TokenEvent event;
};

// The events of one request's sequences, from the scheduler thread to the HTTP thread.
class RequestChannel {
 public:
  void push(ChoiceEvent event);
  // The sequences cannot go on (the model failed, the server stops): `message` says why.
  void fail(const std::string& message);
  // Waits up to `timeout` for events; returns those that came (maybe none). Throws
  // std::runtime_error with the failure's message once failed.
  std::vector<ChoiceEvent> take(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<ChoiceEvent> events_;
  std::optional<std::string> failure_;
};

class ModelScheduler {
 public:
  // `tokenizer` (may be null) must outlive the scheduler. Starts the thread.
  ModelScheduler(std::unique_ptr<generate::NextTokenModel> model, const tokenizer::Tokenizer* tokenizer);
  ~ModelScheduler();  // stop()s
  ModelScheduler(const ModelScheduler&) = delete;
  ModelScheduler& operator=(const ModelScheduler&) = delete;

  // Queues one sequence per request (choice i = requests[i]); all are checked first (UserError
  // naming the request, and nothing queued). Returns their ids for cancel().
  std::vector<uint64_t> submit(std::span<const generate::GenerationRequest> requests,
                               std::optional<int64_t> top_logprobs, std::shared_ptr<RequestChannel> channel);
  // The sequences get nothing more; their slots are freed at the next step.
  void cancel(std::span<const uint64_t> ids);
  // Fails every sequence (their channels say `why`) and ends the thread; later submits fail.
  void stop(const std::string& why = "the server is shutting down");

  const generate::NextTokenModel& model() const { return *model_; }

 private:
  void run();
  void fail_all(const std::string& why);  // under mutex_

  std::unique_ptr<generate::NextTokenModel> model_;
  const tokenizer::Tokenizer* tokenizer_;
  generate::GenerationEngine engine_;
  std::map<uint64_t, std::shared_ptr<RequestChannel>> live_;  // sequences not finished yet
  std::mutex mutex_;
  std::condition_variable work_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace surogate::serve
