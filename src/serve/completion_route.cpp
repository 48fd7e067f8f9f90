// The completion routes (completion_route.h).
#include "serve/completion_route.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "core/error.h"
#include "serve/api_error.h"
#include "serve/responses.h"

namespace surogate::serve {
namespace {

using Json = nlohmann::json;
constexpr std::chrono::milliseconds kPoll(50);

// The field an error about prompt `index` names: `messages`, `prompt`, or `prompt[i]` in a list.
std::string prompt_field(const CompletionRequest& parsed, size_t index) {
  if (parsed.endpoint == Endpoint::chat) return "messages";
  return parsed.prompts.size() == 1 ? "prompt" : fmt::format("prompt[{}]", index);
}

ModelScheduler& pick_model(ServeContext& context, const std::string& name) {
  const auto found = context.schedulers.find(name);
  if (found == context.schedulers.end()) {
    throw ApiError(404, fmt::format("The model `{}` does not exist; GET /v1/models lists the served ones", name),
                   "model", "invalid_request_error", "model_not_found");
  }
  return *found->second;
}

// The request's prompts as token ids: a chat's one conversation, or each completions prompt.
std::vector<std::vector<int32_t>> build_prompts(ServeContext& context, const CompletionRequest& parsed) {
  std::vector<std::vector<int32_t>> prompts;
  if (parsed.endpoint == Endpoint::chat) {
    try {
      std::lock_guard lock(context.prompts_mutex);
      prompts.push_back(context.prompts.from_messages(parsed.messages, parsed.enable_thinking));
    } catch (const UserError& error) {
      fail_field("messages", error.what());
    }
    return prompts;
  }
  for (size_t index = 0; index < parsed.prompts.size(); ++index) {
    const CompletionPrompt& prompt = parsed.prompts[index];
    if (!prompt.text) {
      prompts.push_back(prompt.ids);
      continue;
    }
    try {
      std::lock_guard lock(context.prompts_mutex);
      prompts.push_back(context.prompts.from_text(*prompt.text));
    } catch (const UserError& error) {
      fail_field(prompt_field(parsed, index), error.what());
    }
  }
  return prompts;
}

// max_tokens, else the folder's generation_config.json limit, else what the context leaves.
int64_t token_budget(const CompletionRequest& parsed, size_t prompt_index,
                     const generate::GenerationDefaults& defaults, int64_t prompt_length, int64_t context) {
  if (prompt_length >= context) {
    fail_field(prompt_field(parsed, prompt_index),
               fmt::format("the prompt has {} tokens, as many as the server's context of {} or more", prompt_length,
                           context));
  }
  if (parsed.max_tokens) {
    if (prompt_length + *parsed.max_tokens > context) {
      fail_field("max_tokens", fmt::format("a prompt of {} tokens plus max_tokens {} exceeds the server's context of {}",
                                           prompt_length, *parsed.max_tokens, context));
    }
    return *parsed.max_tokens;
  }
  const int64_t left = context - prompt_length;
  return std::clamp<int64_t>(generate::new_token_limit(defaults, prompt_length).value_or(left), 1, left);
}

// A choice as its events come in.
struct ChoiceState {
  Choice choice;
  bool started = false;
  bool finished = false;
};

// Adds one event to its choice; returns the event's own logprobs entry (when asked for).
std::optional<std::vector<TokenLogprobs>> accumulate(ChoiceState& state, const generate::TokenEvent& event) {
  std::optional<std::vector<TokenLogprobs>> own;
  if (event.logprobs) {
    own = std::vector<TokenLogprobs>{{event.token, *event.logprobs}};
    if (!state.choice.logprobs) state.choice.logprobs.emplace();
    state.choice.logprobs->push_back(own->front());
  }
  state.choice.text += event.text;
  ++state.choice.tokens;
  if (event.finish) {
    state.choice.finish_reason = std::string(generate::finish_reason_name(*event.finish));
    state.finished = true;
  }
  return own;
}

Usage usage_of(const std::vector<ChoiceState>& choices, int64_t prompt_tokens) {
  Usage usage{prompt_tokens, 0};
  for (const ChoiceState& state : choices) usage.completion_tokens += state.choice.tokens;
  return usage;
}

// One streamed request: called by cpp-httplib's chunked content provider until done.
struct StreamState {
  ServeContext& context;
  ModelScheduler& scheduler;
  ResponseHeader header;
  std::shared_ptr<RequestChannel> channel;
  std::vector<uint64_t> ids;
  std::vector<ChoiceState> choices;
  int64_t prompt_tokens = 0;
  bool include_usage = false;
  size_t finished = 0;
  bool done = false;

  // False when the client is gone: cpp-httplib then closes the connection.
  bool write_some(httplib::DataSink& sink) {
    std::vector<ChoiceEvent> events;
    try {
      events = channel->take(kPoll);
    } catch (const std::exception& error) {
      done = true;
      const std::string failure = sse_event(ApiError::error_body(error.what(), "server_error", "", ""));
      sink.write(failure.data(), failure.size());
      sink.write(kDone, std::char_traits<char>::length(kDone));
      sink.done();
      return true;
    }
    for (const ChoiceEvent& item : events) {
      ChoiceState& state = choices[static_cast<size_t>(item.choice)];
      const int64_t offset = static_cast<int64_t>(state.choice.text.size());
      const auto own = accumulate(state, item.event);
      if (item.event.text.empty() && !own && !state.finished && state.started) continue;
      const std::string event = sse_event(chunk(header, item.choice, item.event.text, !state.started, own,
                                                state.choice.finish_reason, *context.tokenizer, offset));
      state.started = true;
      if (state.finished) ++finished;
      if (!sink.write(event.data(), event.size())) return false;
    }
    if (finished == choices.size() && !done) {
      done = true;
      std::string tail;
      if (include_usage) tail += sse_event(usage_chunk(header, usage_of(choices, prompt_tokens)));
      tail += kDone;
      if (!sink.write(tail.data(), tail.size())) return false;
      sink.done();
    }
    return true;
  }

  // After the response, or when the connection failed: sequences still running are cancelled.
  void release() {
    if (!done) scheduler.cancel(ids);
  }
};

}  // namespace

void handle_completion(ServeContext& context, Endpoint endpoint, const httplib::Request& request,
                       httplib::Response& response) {
  const CompletionRequest parsed = parse_request(request.body, endpoint);
  ModelScheduler& scheduler = pick_model(context, parsed.model);
  const std::vector<std::vector<int32_t>> prompts = build_prompts(context, parsed);
  const generate::SamplingOptions sampling = request_sampling(parsed, context.defaults.sampling);
  const uint64_t seed = parsed.seed.value_or(std::random_device{}());
  // OpenAI's order: prompt i's n choices are choices i * n ... i * n + n - 1.
  std::vector<generate::GenerationRequest> sequences;
  int64_t prompt_tokens = 0;
  for (size_t index = 0; index < prompts.size(); ++index) {
    const std::vector<int32_t>& prompt = prompts[index];
    const int64_t budget = token_budget(parsed, index, context.defaults, static_cast<int64_t>(prompt.size()),
                                        scheduler.model().max_context());
    prompt_tokens += static_cast<int64_t>(prompt.size());
    for (int64_t choice = 0; choice < parsed.n; ++choice) {
      sequences.push_back({prompt, sampling, seed + sequences.size(), budget, context.defaults.eos_token_ids,
                           parsed.stop});
    }
  }
  auto channel = std::make_shared<RequestChannel>();
  std::vector<uint64_t> ids;
  try {
    ids = scheduler.submit(sequences, parsed.logprobs, channel);
  } catch (const UserError& error) {
    fail_field(parsed.endpoint == Endpoint::chat ? "messages" : "prompt", error.what());
  }
  const ResponseHeader header = new_header(endpoint, parsed.model);
  std::vector<ChoiceState> choices(sequences.size());

  if (parsed.stream) {
    auto state = std::make_shared<StreamState>(StreamState{context, scheduler, header, channel, ids, std::move(choices),
                                                           prompt_tokens, parsed.include_usage});
    response.set_header("Cache-Control", "no-cache");
    response.set_chunked_content_provider(
        "text/event-stream", [state](size_t, httplib::DataSink& sink) { return state->write_some(sink); },
        [state](bool) { state->release(); });
    return;
  }
  size_t finished = 0;
  try {
    while (finished < choices.size()) {
      for (const ChoiceEvent& item : channel->take(kPoll)) {
        ChoiceState& state = choices[static_cast<size_t>(item.choice)];
        accumulate(state, item.event);
        if (state.finished) ++finished;
      }
    }
  } catch (const std::runtime_error& error) {
    scheduler.cancel(ids);
    throw ApiError(500, error.what(), "", "server_error");
  }
  const Usage usage = usage_of(choices, prompt_tokens);
  std::vector<Choice> done;
  for (ChoiceState& state : choices) done.push_back(std::move(state.choice));
  const Json body = complete_response(header, done, usage, *context.tokenizer);
  response.set_content(body.dump(), "application/json");
}

}  // namespace surogate::serve
