// The body of POST /v1/chat/completions or /v1/completions, checked field by field: a field of
// the wrong type or out of range is an ApiError 400 naming it; unknown fields are ignored, as
// OpenAI does; known fields this server cannot honour and that would change the output (tools,
// response_format, logit_bias, ...) are refused by name rather than silently ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/generation_defaults.h"

namespace surogate::serve {

enum class Endpoint { chat, completions };

// One prompt of /v1/completions: text, or token ids when `text` is empty.
struct CompletionPrompt {
  std::optional<std::string> text;
  std::vector<int32_t> ids;
};

struct CompletionRequest {
  Endpoint endpoint = Endpoint::chat;
  std::string model;
  nlohmann::ordered_json messages;        // chat: [{"role", "content" (text)}, ...]
  std::optional<bool> enable_thinking;    // chat: chat_template_kwargs.enable_thinking (vLLM's extension)
  std::vector<CompletionPrompt> prompts;  // completions: one or several, each text or token ids
  std::optional<int64_t> max_tokens;      // max_tokens or max_completion_tokens
  // The sampling fields given, checked: temperature, top_p, and vLLM's top_k, min_p, repetition_penalty.
  nlohmann::json sampling = nlohmann::json::object();
  std::vector<std::string> stop;
  std::optional<uint64_t> seed;
  int64_t n = 1;
  std::optional<int64_t> logprobs;        // top N per token (chat: top_logprobs with logprobs true)
  bool stream = false;
  bool include_usage = false;             // stream_options.include_usage
};

// Limits as OpenAI documents them.
inline constexpr int64_t kMaxChoices = 128;
inline constexpr int64_t kMaxTopLogprobs = 20;
inline constexpr size_t kMaxStopStrings = 4;
// This server's bound on one completions request's list of prompts (OpenAI's is 2,048 entries).
inline constexpr size_t kMaxPrompts = 128;

// ApiError 400 naming the field (the body itself when it is not a JSON object).
CompletionRequest parse_request(const std::string& body, Endpoint endpoint);

// `base` (the server's defaults) with the request's sampling fields. A temperature given decides
// greedy (0) or sampling (> 0), as OpenAI's; without one the server's default stands.
generate::SamplingOptions request_sampling(const CompletionRequest& request, const generate::SamplingOptions& base);

}  // namespace surogate::serve
