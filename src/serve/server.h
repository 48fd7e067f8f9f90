// `surogate serve`'s HTTP server (cpp-httplib): an OpenAI-compatible API over one or more loaded
// models, each driven by its own ModelScheduler thread.
//   POST /v1/chat/completions, POST /v1/completions — streaming (server-sent events) or not;
//   GET /v1/models — the served names; GET /health.
// Every request is answered, whatever happens in it: an ApiError with its status, a UserError as
// a 400, anything else as a 500 with the message; the server goes on. With an API key, a request
// without `Authorization: Bearer KEY` gets a 401. A body over max_request_bytes gets a 413.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "generate/engine.h"
#include "generate/generation_defaults.h"
#include "generate/next_token_model.h"

namespace surogate::serve {

struct ServedModel {
  std::string name;  // what a request's `model` says to pick it
  std::unique_ptr<generate::NextTokenModel> model;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                            // 0: any free port
  std::string api_key;                        // empty: no key asked
  size_t max_request_bytes = 8u << 20;
  int threads = 64;                           // HTTP worker threads (one per open connection)
  generate::GenerationDefaults defaults;      // sampling, EOS ids and max_new_tokens of requests
  std::optional<bool> enable_thinking;        // passed to the chat template unless a request says
  int64_t max_prefill_tokens = generate::kDefaultMaxPrefillTokens;  // prompt tokens per step
};

class Server {
 public:
  // `model_dir` holds the tokenizer and the chat template; `models` the first is the default.
  // UserError when the folder has no tokenizer or two models share a name.
  Server(const std::filesystem::path& model_dir, std::vector<ServedModel> models, ServerOptions options);
  ~Server();

  // Binds host:port; returns the port (the one picked when port is 0). UserError when it cannot.
  int bind();
  // Serves until stop(); then every scheduler is stopped.
  void run();
  // From any thread: running sequences fail, the listener closes, run() returns.
  void stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace surogate::serve
