// `surogate serve --model DIR [--adapter NAME=DIR ...] [--host 127.0.0.1] [--port 8000]`: an
// OpenAI-compatible HTTP server (serve/server.h). The base model is served under its folder's name
// (or --served_model_name) and each adapter under its NAME; each is its own model with --batch_size
// slots and its own KV caches, reading the base model's weights in place (one copy of the weights
// however many adapters; generate::open_kv_cache_adapter). The sampling flags
// set the defaults of requests that do not say. Ctrl-C (SIGINT) or SIGTERM stops it.
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/generation_flags.h"
#include "core/error.h"
#include "io/model_config.h"
#include "serve/server.h"

namespace surogate::cli {
namespace {
namespace fs = std::filesystem;

int stop_pipe[2] = {-1, -1};  // the stop signals' handler writes here (run_serve)

struct ServeArguments {
  ModelFlags model;
  SamplingFlags sampling;
  std::vector<std::string> adapters;  // NAME=DIR
  std::string served_model_name;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key, api_key_file;
  int64_t batch_size = 8;
  int64_t max_context = 0;  // 0: config.json's max_position_embeddings, capped at 8192
  size_t max_request_bytes = 8u << 20;
  int64_t max_prefill_tokens = generate::kDefaultMaxPrefillTokens;
  bool seed_given = false;
};

std::string read_api_key(const ServeArguments& arguments) {
  if (arguments.api_key_file.empty()) return arguments.api_key;
  if (!arguments.api_key.empty()) fail_user("--api_key and --api_key_file: give one of them");
  std::ifstream file(arguments.api_key_file);
  if (!file) fail_user("--api_key_file {}: cannot read it", arguments.api_key_file);
  std::string key;
  std::getline(file, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.empty()) fail_user("--api_key_file {}: the first line is empty", arguments.api_key_file);
  return key;
}

std::vector<serve::ServedModel> load_models(const ServeArguments& arguments, const std::string& base_name,
                                            int64_t context) {
  std::vector<serve::ServedModel> models;
  models.push_back({base_name, open_model(arguments.model, arguments.batch_size, context)});
  for (const std::string& adapter : arguments.adapters) {
    const size_t equals = adapter.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == adapter.size()) {
      fail_user("--adapter {}: give NAME=DIR (the name requests use as `model`, the PEFT adapter folder)", adapter);
    }
    ModelFlags flags = arguments.model;
    flags.adapter = adapter.substr(equals + 1);
    if (!fs::is_directory(flags.adapter)) fail_user("--adapter {}: {} is not a folder", adapter, flags.adapter);
    models.push_back({adapter.substr(0, equals),
                      open_model(flags, arguments.batch_size, context, models.front().model.get())});
  }
  return models;
}

int run_serve(const ServeArguments& arguments) {
  const fs::path model_dir(arguments.model.model);
  if (!fs::is_directory(model_dir)) fail_user("--model {}: not a folder; give a Hugging Face model folder", model_dir.string());
  refuse_vision_language_folder("serve", model_dir);
  if (!arguments.sampling.stop.empty()) fail_user("--stop: serve takes stop strings per request (the `stop` field)");
  if (arguments.seed_given) fail_user("--seed: serve takes the seed per request (the `seed` field)");
  serve::ServerOptions options;
  options.host = arguments.host;
  options.port = arguments.port;
  options.api_key = read_api_key(arguments);
  options.max_request_bytes = arguments.max_request_bytes;
  options.max_prefill_tokens = arguments.max_prefill_tokens;
  options.defaults = generate::read_generation_defaults(model_dir);
  options.defaults.sampling = sampling_options(arguments.sampling, options.defaults);
  if (arguments.sampling.max_new_tokens) options.defaults.max_new_tokens = arguments.sampling.max_new_tokens;
  options.enable_thinking = arguments.sampling.enable_thinking;
  const int64_t positions = io::load_model_config(model_dir).max_position_embeddings;
  const int64_t context = arguments.max_context > 0 ? arguments.max_context
                                                     : (positions > 0 ? std::min<int64_t>(positions, 8192) : 8192);
  std::string base_name = arguments.served_model_name;
  if (base_name.empty()) base_name = fs::absolute(model_dir).lexically_normal().filename().string();
  if (base_name.empty()) base_name = fs::absolute(model_dir).lexically_normal().parent_path().filename().string();

  // SIGINT and SIGTERM write their number to a pipe (all a signal handler may safely do, on
  // whichever thread the signal lands, some of which a library started); a watcher thread reads it
  // and stops the server. A write to a closed connection must not kill the process either.
  ::signal(SIGPIPE, SIG_IGN);
  if (::pipe(stop_pipe) != 0) fail_user("serve: cannot create a pipe for the stop signals");
  struct sigaction action {};
  action.sa_handler = [](int signal_number) {
    const char byte = static_cast<char>(signal_number);
    [[maybe_unused]] const ssize_t written = ::write(stop_pipe[1], &byte, 1);
  };
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);

  serve::Server server(model_dir, load_models(arguments, base_name, context), options);
  const int port = server.bind();
  std::thread watcher([&server] {
    char signal_number = 0;
    while (::read(stop_pipe[0], &signal_number, 1) < 0 && errno == EINTR) {
    }
    std::cerr << "stopping (signal " << static_cast<int>(signal_number) << ")\n";
    server.stop();
  });
  std::cout << fmt::format("serving {} on http://{}:{}", base_name, arguments.host, port) << std::endl;
  server.run();
  watcher.join();
  return 0;
}

}  // namespace

Command register_serve_command(CLI::App& parent) {
  auto arguments = std::make_shared<ServeArguments>();
  CLI::App* app = parent.add_subcommand("serve", "Serve a model folder (and LoRA adapters) over an OpenAI-compatible HTTP API");
  add_model_flags(*app, arguments->model, /*with_adapter=*/false);
  app->add_option("--adapter", arguments->adapters,
                  "NAME=DIR: a PEFT LoRA adapter served as model NAME (repeatable; adapters share the base model's weights)");
  app->add_option("--served_model_name,--served-model-name", arguments->served_model_name,
                  "The base model's name in requests and /v1/models (default: the folder's name)");
  app->add_option("--host", arguments->host, "Address to bind (default 127.0.0.1: this machine only)");
  app->add_option("--port", arguments->port, "Port (default 8000; 0 picks a free one)")->check(CLI::Range(0, 65535));
  app->add_option("--api_key,--api-key", arguments->api_key, "Requests must send `Authorization: Bearer KEY`");
  app->add_option("--api_key_file,--api-key-file", arguments->api_key_file, "Read the API key from this file's first line");
  app->add_option("--batch_size,--batch-size", arguments->batch_size, "Sequences generated at once per model (slots)")
      ->check(positive_count());
  app->add_option("--max_context,--max-context", arguments->max_context,
                  "Tokens a sequence may hold (default: max_position_embeddings, at most 8192)")
      ->check(positive_count());
  app->add_option("--max_prefill_tokens,--max-prefill-tokens", arguments->max_prefill_tokens,
                  "Prompt tokens fed per step beside the decoding sequences: longer prompts come in chunks "
                  "(default 1024)")
      ->check(positive_count());
  app->add_option("--max_request_bytes,--max-request-bytes", arguments->max_request_bytes,
                  "Larger request bodies get HTTP 413 (default 8 MiB)")
      ->check(CLI::PositiveNumber);
  add_sampling_flags(*app, arguments->sampling);
  return Command{app, [arguments, app] {
                   arguments->seed_given = app->count("--seed") > 0;
                   return run_serve(*arguments);
                 }};
}

const CommandRegistration kServeRegistration{107, register_serve_command};

}  // namespace surogate::cli
