// OpenAI-shaped responses (responses.h).
#include "serve/responses.h"

#include <chrono>
#include <random>

#include <fmt/format.h>

namespace surogate::serve {
namespace {

using Json = nlohmann::json;

std::string token_text(const tokenizer::Tokenizer& tokenizer, int32_t token) {
  return tokenizer.decode(std::span<const int32_t>(&token, 1), false);
}

Json utf8_bytes(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char byte : text) bytes.push_back(static_cast<int>(byte));
  return bytes;
}

Json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

Json header_json(const ResponseHeader& header, bool chunked) {
  std::string object = header.endpoint == Endpoint::chat ? "chat.completion" : "text_completion";
  if (chunked && header.endpoint == Endpoint::chat) object += ".chunk";
  return {{"id", header.id}, {"object", object}, {"created", header.created}, {"model", header.model}};
}

}  // namespace

ResponseHeader new_header(Endpoint endpoint, const std::string& model) {
  thread_local std::mt19937_64 random(std::random_device{}());
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  return {endpoint, fmt::format("{}-{:016x}", endpoint == Endpoint::chat ? "chatcmpl" : "cmpl", random()), now, model};
}

Json logprobs_json(Endpoint endpoint, std::span<const TokenLogprobs> tokens, const tokenizer::Tokenizer& tokenizer,
                   int64_t text_offset) {
  if (endpoint == Endpoint::chat) {
    Json content = Json::array();
    for (const TokenLogprobs& entry : tokens) {
      const std::string text = token_text(tokenizer, entry.token);
      Json top = Json::array();
      for (const generate::TokenLogprob& candidate : entry.logprobs.top) {
        const std::string candidate_text = token_text(tokenizer, candidate.token);
        top.push_back({{"token", candidate_text}, {"logprob", candidate.logprob}, {"bytes", utf8_bytes(candidate_text)}});
      }
      content.push_back({{"token", text}, {"logprob", entry.logprobs.chosen}, {"bytes", utf8_bytes(text)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  Json out = {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
  for (const TokenLogprobs& entry : tokens) {
    const std::string text = token_text(tokenizer, entry.token);
    out["tokens"].push_back(text);
    out["token_logprobs"].push_back(entry.logprobs.chosen);
    Json top = Json::object();
    for (const generate::TokenLogprob& candidate : entry.logprobs.top) {
      top[token_text(tokenizer, candidate.token)] = candidate.logprob;
    }
    out["top_logprobs"].push_back(top);
    out["text_offset"].push_back(text_offset);
    text_offset += static_cast<int64_t>(text.size());
  }
  return out;
}

Json complete_response(const ResponseHeader& header, std::span<const Choice> choices, const Usage& usage,
                       const tokenizer::Tokenizer& tokenizer) {
  Json out = header_json(header, false);
  out["choices"] = Json::array();
  for (size_t index = 0; index < choices.size(); ++index) {
    const Choice& choice = choices[index];
    Json row = {{"index", index}};
    if (header.endpoint == Endpoint::chat) {
      row["message"] = {{"role", "assistant"}, {"content", choice.text}};
    } else {
      row["text"] = choice.text;
    }
    row["logprobs"] = choice.logprobs ? logprobs_json(header.endpoint, *choice.logprobs, tokenizer, 0) : Json();
    row["finish_reason"] = choice.finish_reason;
    out["choices"].push_back(row);
  }
  out["usage"] = usage_json(usage);
  return out;
}

Json chunk(const ResponseHeader& header, int64_t index, const std::string& text, bool first,
           const std::optional<std::vector<TokenLogprobs>>& logprobs, const std::string& finish_reason,
           const tokenizer::Tokenizer& tokenizer, int64_t text_offset) {
  Json out = header_json(header, true);
  Json row = {{"index", index}};
  if (header.endpoint == Endpoint::chat) {
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    row["delta"] = delta;
  } else {
    row["text"] = text;
  }
  row["logprobs"] = logprobs ? logprobs_json(header.endpoint, *logprobs, tokenizer, text_offset) : Json();
  row["finish_reason"] = finish_reason.empty() ? Json() : Json(finish_reason);
  out["choices"] = Json::array({row});
  return out;
}

Json usage_chunk(const ResponseHeader& header, const Usage& usage) {
  Json out = header_json(header, true);
  out["choices"] = Json::array();
  out["usage"] = usage_json(usage);
  return out;
}

std::string sse_event(const Json& chunk) { return "data: " + chunk.dump() + "\n\n"; }

}  // namespace surogate::serve
