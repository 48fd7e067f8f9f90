// The HTTP server (server.h): cpp-httplib's wiring, the API key, errors and the small routes.
#include "serve/server.h"

#include <httplib.h>

#include <fmt/format.h>

#include "core/error.h"
#include "serve/api_error.h"
#include "serve/auth.h"
#include "serve/completion_route.h"
#include "serve/serve_context.h"

namespace surogate::serve {
namespace {

using Json = nlohmann::json;

void send_json(httplib::Response& response, int status, const Json& body) {
  response.status = status;
  response.set_content(body.dump(), "application/json");
}

void send_error(httplib::Response& response, int status, const std::string& message, const std::string& type,
                const std::string& code = {}) {
  send_json(response, status, ApiError::error_body(message, type, "", code));
}

// Runs a route after the API key check (in the route, not before routing, so that the body is
// read and the connection stays usable); whatever it throws becomes the answer of this request only.
template <typename Route>
httplib::Server::Handler guarded(const std::string& key, Route route) {
  return [key, route](const httplib::Request& request, httplib::Response& response) {
    try {
      if (!key.empty() && !bearer_matches(request.get_header_value("Authorization"), key)) {
        throw ApiError(401, "Incorrect or missing API key: send `Authorization: Bearer KEY`", "",
                       "invalid_request_error", "invalid_api_key");
      }
      route(request, response);
    } catch (const ApiError& error) {
      send_json(response, error.status(), error.body());
    } catch (const UserError& error) {
      send_error(response, 400, error.what(), "invalid_request_error");
    } catch (const std::exception& error) {
      send_error(response, 500, std::string("internal error: ") + error.what(), "server_error");
    } catch (...) {
      send_error(response, 500, "internal error", "server_error");
    }
  };
}

}  // namespace

struct Server::State {
  State(const std::filesystem::path& model_dir, ServerOptions server_options)
      : options(std::move(server_options)), context(model_dir, options.enable_thinking) {}

  ServerOptions options;
  ServeContext context;
  httplib::Server http;
};

Server::Server(const std::filesystem::path& model_dir, std::vector<ServedModel> models, ServerOptions options)
    : state_(std::make_unique<State>(model_dir, std::move(options))) {
  ServeContext& context = state_->context;
  context.tokenizer = &context.prompts.tokenizer();  // loaded now: the schedulers decode with it
  context.defaults = state_->options.defaults;
  for (ServedModel& served : models) {
    if (context.schedulers.count(served.name) > 0) fail_user("two served models are named `{}`", served.name);
    context.names.push_back(served.name);
    context.schedulers.emplace(served.name, std::make_unique<ModelScheduler>(std::move(served.model), context.tokenizer,
                                                                            state_->options.max_prefill_tokens));
  }

  httplib::Server& http = state_->http;
  const int threads = state_->options.threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http.set_payload_max_length(state_->options.max_request_bytes);
  const std::string key = state_->options.api_key;
  // Errors cpp-httplib answers itself (no route, a body over the limit) get an OpenAI-style body.
  const size_t limit = state_->options.max_request_bytes;
  http.set_error_handler(httplib::Server::HandlerWithResponse([limit](const httplib::Request& request,
                                                                    httplib::Response& response) {
    if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const int status = response.status;
    if (status == 413) {
      send_error(response, 413, fmt::format("the request body is over the server's limit of {} bytes", limit),
                 "invalid_request_error");
    } else if (status == 404) {
      send_error(response, 404, fmt::format("no route {} {}", request.method, request.path), "invalid_request_error");
    } else {
      send_error(response, status, fmt::format("HTTP {}", status), status >= 500 ? "server_error" : "invalid_request_error");
    }
    return httplib::Server::HandlerResponse::Handled;
  }));

  http.Get("/health", guarded(key, [](const httplib::Request&, httplib::Response& response) {
    send_json(response, 200, {{"status", "ok"}});
  }));
  http.Get("/v1/models", guarded(key, [&context](const httplib::Request&, httplib::Response& response) {
    Json data = Json::array();
    for (const std::string& name : context.names) {
      data.push_back({{"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "surogate"}});
    }
    send_json(response, 200, {{"object", "list"}, {"data", data}});
  }));
  http.Post("/v1/chat/completions", guarded(key, [&context](const httplib::Request& request, httplib::Response& response) {
    handle_completion(context, Endpoint::chat, request, response);
  }));
  http.Post("/v1/completions", guarded(key, [&context](const httplib::Request& request, httplib::Response& response) {
    handle_completion(context, Endpoint::completions, request, response);
  }));
}

Server::~Server() {
  stop();
  state_->context.schedulers.clear();
}

int Server::bind() {
  const ServerOptions& options = state_->options;
  if (options.port == 0) {
    const int port = state_->http.bind_to_any_port(options.host);
    if (port <= 0) fail_user("--host {}: cannot bind a port", options.host);
    return port;
  }
  if (!state_->http.bind_to_port(options.host, options.port)) {
    fail_user("--host {} --port {}: cannot bind (in use, or not an address of this machine)", options.host, options.port);
  }
  return options.port;
}

void Server::run() {
  state_->http.listen_after_bind();
  for (auto& [name, scheduler] : state_->context.schedulers) scheduler->stop();
}

void Server::stop() {
  // The schedulers first: requests waiting on their tokens are answered and the workers freed.
  for (auto& [name, scheduler] : state_->context.schedulers) scheduler->stop();
  state_->http.stop();
}

}  // namespace surogate::serve
