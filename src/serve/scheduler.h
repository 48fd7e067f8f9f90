// One thread per loaded model that drives its GenerationEngine: while sequences wait or run it
// calls step(), otherwise it sleeps on a condition variable until a request comes. HTTP threads
// submit the sequences of a request with a RequestChannel and read their tokens from it as the
// scheduler thread pushes them. Only the scheduler thread touches the engine: submits and cancels
// are queued under a lock that is never held during a step, and taken in before the next one.
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
  // `tokenizer` (may be null) must outlive the scheduler. Starts the thread. Each step feeds at
  // most `max_prefill_tokens` prompt tokens beside the decoding sequences (GenerationEngine's).
  ModelScheduler(std::unique_ptr<generate::NextTokenModel> model, const tokenizer::Tokenizer* tokenizer,
                 int64_t max_prefill_tokens = generate::kDefaultMaxPrefillTokens);
  ~ModelScheduler();  // stop()s
  ModelScheduler(const ModelScheduler&) = delete;
  ModelScheduler& operator=(const ModelScheduler&) = delete;

  // Queues one sequence per request (choice i = requests[i]); all are checked first (UserError
  // naming the request, and nothing queued). Returns their tickets for cancel().
  std::vector<uint64_t> submit(std::span<const generate::GenerationRequest> requests,
                               std::optional<int64_t> top_logprobs, std::shared_ptr<RequestChannel> channel);
  // The sequences get nothing more; their slots are freed at the next step.
  void cancel(std::span<const uint64_t> tickets);
  // Fails every sequence (their channels say `why`) and ends the thread; later submits fail.
  void stop(const std::string& why = "the server is shutting down");

  const generate::NextTokenModel& model() const { return *model_; }

 private:
  // A sequence submitted, not yet handed to the engine.
  struct Pending {
    uint64_t ticket = 0;
    generate::GenerationRequest request;
    std::optional<int64_t> top_logprobs;
    std::shared_ptr<RequestChannel> channel;
    int64_t choice = 0;
  };

  void run();
  void take_in();  // the queued submits and cancels into the engine (scheduler thread)
  void fail_live(const std::string& why);  // takes mutex_

  std::unique_ptr<generate::NextTokenModel> model_;
  const tokenizer::Tokenizer* tokenizer_;
  generate::GenerationEngine engine_;                 // scheduler thread only
  std::map<uint64_t, uint64_t> engine_ids_;           // ticket -> engine id (scheduler thread only)
  std::mutex mutex_;                                  // guards what follows
  std::condition_variable work_;
  std::vector<Pending> pending_;
  std::vector<uint64_t> cancels_;
  std::map<uint64_t, std::shared_ptr<RequestChannel>> live_;  // tickets not finished or cancelled
  uint64_t next_ticket_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace surogate::serve
