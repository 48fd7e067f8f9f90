// The JSON a client gets back, as OpenAI shapes it: chat.completion / text_completion objects,
// their streamed `.chunk` forms (one per event, then one carrying finish_reason, then a usage-only
// chunk when stream_options.include_usage asked for it), `usage`, and `logprobs` in the chat form
// ({"content": [{"token", "logprob", "bytes", "top_logprobs"}]}) or the legacy completions form
// ({"tokens", "token_logprobs", "top_logprobs", "text_offset"}).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/sampling.h"
#include "serve/request_parsing.h"
#include "tokenizer/tokenizer.h"

namespace surogate::serve {

struct ResponseHeader {
  Endpoint endpoint = Endpoint::chat;
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

// A fresh header for a request to `endpoint` naming `model`.
ResponseHeader new_header(Endpoint endpoint, const std::string& model);

struct TokenLogprobs {
  int32_t token = 0;
  generate::Logprobs logprobs;
};

struct Choice {
  std::string text;
  std::string finish_reason;                    // "stop" or "length"
  std::optional<std::vector<TokenLogprobs>> logprobs;  // when the request asked
  int64_t tokens = 0;                           // generated tokens
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// `text_offset`: where the first token's text starts in the completion (completions form only).
nlohmann::json logprobs_json(Endpoint endpoint, std::span<const TokenLogprobs> tokens,
                             const tokenizer::Tokenizer& tokenizer, int64_t text_offset);

nlohmann::json complete_response(const ResponseHeader& header, std::span<const Choice> choices, const Usage& usage,
                                 const tokenizer::Tokenizer& tokenizer);

// One streamed chunk for choice `index`: `text` (the chat form's first chunk of a choice also says
// role "assistant"), logprobs of the tokens it covers (or none), finish_reason on the last one.
nlohmann::json chunk(const ResponseHeader& header, int64_t index, const std::string& text, bool first,
                     const std::optional<std::vector<TokenLogprobs>>& logprobs, const std::string& finish_reason,
                     const tokenizer::Tokenizer& tokenizer, int64_t text_offset);

nlohmann::json usage_chunk(const ResponseHeader& header, const Usage& usage);

// "data: JSON\n\n", the server-sent event of one chunk; kDone ends the stream.
std::string sse_event(const nlohmann::json& chunk);
inline constexpr const char* kDone = "data: [DONE]\n\n";

}  // namespace surogate::serve
