// Parsing an OpenAI completion request (request_parsing.h).
#include "serve/request_parsing.h"

#include <limits>

#include <fmt/format.h>

#include "serve/api_error.h"

namespace surogate::serve {
namespace {

using Body = nlohmann::ordered_json;

bool present(const Body& body, const char* field) { return body.contains(field) && !body.at(field).is_null(); }

std::optional<double> number_field(const Body& body, const char* field, double low, double high, bool low_open) {
  if (!present(body, field)) return std::nullopt;
  const Body& value = body.at(field);
  if (!value.is_number()) fail_field(field, "must be a number");
  const double number = value.get<double>();
  if (!(low_open ? number > low : number >= low) || !(number <= high)) {
    fail_field(field, "must be in " + std::string(low_open ? "(" : "[") + nlohmann::json(low).dump() + ", " +
                          nlohmann::json(high).dump() + "], got " + value.dump());
  }
  return number;
}

std::optional<int64_t> integer_field(const Body& body, const char* field, int64_t low, int64_t high) {
  if (!present(body, field)) return std::nullopt;
  const Body& value = body.at(field);
  if (!value.is_number_integer()) fail_field(field, "must be an integer");
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(high)) {
    fail_field(field, "must be at most " + std::to_string(high) + ", got " + value.dump());
  }
  const int64_t number = value.get<int64_t>();
  if (number < low || number > high) {
    fail_field(field, "must be in [" + std::to_string(low) + ", " + std::to_string(high) + "], got " + value.dump());
  }
  return number;
}

bool bool_field(const Body& body, const char* field) {
  if (!present(body, field)) return false;
  if (!body.at(field).is_boolean()) fail_field(field, "must be true or false");
  return body.at(field).get<bool>();
}

// Fields OpenAI defines that would change the output and that this server does not implement.
void refuse_unsupported(const Body& body) {
  for (const char* field : {"tools", "tool_choice", "functions", "function_call", "response_format", "audio",
                            "prediction", "suffix", "web_search_options"}) {
    if (present(body, field)) fail_field(field, "is not supported by this server");
  }
  if (present(body, "logit_bias") && !(body.at("logit_bias").is_object() && body.at("logit_bias").empty())) {
    fail_field("logit_bias", "is not supported by this server");
  }
  for (const char* field : {"presence_penalty", "frequency_penalty"}) {
    if (present(body, field) && !(body.at(field).is_number() && body.at(field).get<double>() == 0.0)) {
      fail_field(field, "is not supported by this server (only 0)");
    }
  }
  if (bool_field(body, "echo")) fail_field("echo", "is not supported by this server (only false)");
  if (present(body, "best_of") && !(body.at("best_of").is_number_integer() && body.at("best_of").get<int64_t>() == 1)) {
    fail_field("best_of", "is not supported by this server (only 1)");
  }
  if (present(body, "modalities") && body.at("modalities") != Body::array({"text"})) {
    fail_field("modalities", "only [\"text\"] is supported");
  }
}

// Chat messages with text content (a string, or a list of {"type": "text"} parts, joined).
Body parse_messages(const Body& body) {
  if (!present(body, "messages")) fail_field("messages", "is required");
  const Body& messages = body.at("messages");
  if (!messages.is_array() || messages.empty()) fail_field("messages", "must be a non-empty list of messages");
  Body out = Body::array();
  for (size_t index = 0; index < messages.size(); ++index) {
    const Body& message = messages[index];
    const std::string where = "messages[" + std::to_string(index) + "]";
    if (!message.is_object()) fail_field(where, "must be an object");
    if (!message.contains("role") || !message.at("role").is_string()) fail_field(where + ".role", "must be a string");
    Body row = {{"role", message.at("role")}};
    const Body content = message.contains("content") ? message.at("content") : Body();
    if (content.is_string()) {
      row["content"] = content;
    } else if (content.is_array()) {
      std::string text;
      for (const Body& part : content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part.at("text").is_string()) {
          fail_field(where + ".content", "only text parts ({\"type\": \"text\", \"text\": ...}) are supported");
        }
        text += part.at("text").get<std::string>();
      }
      row["content"] = text;
    } else if (content.is_null() && message.contains("tool_calls")) {
      fail_field(where + ".tool_calls", "is not supported by this server");
    } else {
      fail_field(where + ".content", "must be a string or a list of text parts");
    }
    if (message.contains("name") && message.at("name").is_string()) row["name"] = message.at("name");
    out.push_back(row);
  }
  return out;
}

// Token ids of `prompt` (a JSON list of integers), or 400 naming `where`.
std::vector<int32_t> parse_token_ids(const Body& ids, const std::string& where) {
  if (ids.empty()) fail_field(where, "must not be an empty list of token ids");
  std::vector<int32_t> out;
  for (const Body& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      fail_field(where, "token ids must be non-negative integers, got " + id.dump());
    }
    out.push_back(id.get<int32_t>());
  }
  return out;
}

CompletionPrompt parse_text_prompt(const Body& text, const std::string& where) {
  if (text.get<std::string>().empty()) fail_field(where, "must not be empty");
  return {text.get<std::string>(), {}};
}

// OpenAI's four forms: "text", [ids], ["text", ...], [[ids], ...].
void parse_prompt(const Body& body, CompletionRequest& request) {
  if (!present(body, "prompt")) fail_field("prompt", "is required");
  const Body& prompt = body.at("prompt");
  if (prompt.is_string()) {
    request.prompts.push_back(parse_text_prompt(prompt, "prompt"));
    return;
  }
  if (!prompt.is_array() || prompt.empty()) {
    fail_field("prompt", "must be a string, a non-empty list of token ids, or a list of such prompts");
  }
  if (!prompt.front().is_string() && !prompt.front().is_array()) {
    request.prompts.push_back({std::nullopt, parse_token_ids(prompt, "prompt")});
    return;
  }
  if (prompt.size() > kMaxPrompts) {
    fail_field("prompt", fmt::format("a list of {} prompts is more than this server's {}", prompt.size(), kMaxPrompts));
  }
  for (size_t index = 0; index < prompt.size(); ++index) {
    const Body& item = prompt[index];
    const std::string where = fmt::format("prompt[{}]", index);
    if (item.is_string()) {
      request.prompts.push_back(parse_text_prompt(item, where));
    } else if (item.is_array()) {
      request.prompts.push_back({std::nullopt, parse_token_ids(item, where)});
    } else {
      fail_field(where, "must be a string or a list of token ids");
    }
  }
}

std::vector<std::string> parse_stop(const Body& body) {
  if (!present(body, "stop")) return {};
  const Body& stop = body.at("stop");
  std::vector<std::string> out;
  if (stop.is_string()) {
    out.push_back(stop.get<std::string>());
  } else if (stop.is_array()) {
    if (stop.size() > kMaxStopStrings) fail_field("stop", "at most " + std::to_string(kMaxStopStrings) + " strings");
    for (const Body& item : stop) {
      if (!item.is_string()) fail_field("stop", "must be a string or a list of strings");
      out.push_back(item.get<std::string>());
    }
  } else {
    fail_field("stop", "must be a string or a list of strings");
  }
  for (const std::string& text : out) {
    if (text.empty()) fail_field("stop", "a stop string must not be empty");
  }
  return out;
}

void parse_logprobs(const Body& body, CompletionRequest& request) {
  if (request.endpoint == Endpoint::completions) {
    request.logprobs = integer_field(body, "logprobs", 0, kMaxTopLogprobs);
    return;
  }
  const bool wanted = bool_field(body, "logprobs");
  const std::optional<int64_t> top = integer_field(body, "top_logprobs", 0, kMaxTopLogprobs);
  if (top && !wanted) fail_field("top_logprobs", "needs logprobs: true");
  if (wanted) request.logprobs = top.value_or(0);
}

}  // namespace

CompletionRequest parse_request(const std::string& text, Endpoint endpoint) {
  Body body;
  try {
    body = Body::parse(text);
  } catch (const nlohmann::json::exception& error) {
    throw ApiError(400, std::string("the body is not valid JSON: ") + error.what());
  }
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");
  CompletionRequest request;
  request.endpoint = endpoint;
  if (!present(body, "model") || !body.at("model").is_string()) fail_field("model", "is required (a string)");
  request.model = body.at("model").get<std::string>();
  refuse_unsupported(body);
  if (endpoint == Endpoint::chat) {
    request.messages = parse_messages(body);
    if (present(body, "chat_template_kwargs")) {
      const Body& kwargs = body.at("chat_template_kwargs");
      if (!kwargs.is_object()) fail_field("chat_template_kwargs", "must be an object");
      if (kwargs.contains("enable_thinking")) {
        if (!kwargs.at("enable_thinking").is_boolean()) fail_field("chat_template_kwargs.enable_thinking", "must be true or false");
        request.enable_thinking = kwargs.at("enable_thinking").get<bool>();
      }
    }
  } else {
    parse_prompt(body, request);
  }
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  request.max_tokens = integer_field(body, "max_tokens", 1, kInt32Max);
  if (const auto limit = integer_field(body, "max_completion_tokens", 1, kInt32Max)) request.max_tokens = limit;
  const auto keep = [&request](const char* field, auto value) {
    if (value) request.sampling[field] = *value;
  };
  keep("temperature", number_field(body, "temperature", 0.0, 2.0, false));
  keep("top_p", number_field(body, "top_p", 0.0, 1.0, true));
  const std::optional<int64_t> top_k = integer_field(body, "top_k", -1, kInt32Max);
  keep("top_k", top_k == -1 ? std::optional<int64_t>(0) : top_k);  // vLLM spells "off" -1
  keep("min_p", number_field(body, "min_p", 0.0, 1.0, false));
  keep("repetition_penalty", number_field(body, "repetition_penalty", 0.0, 1e9, true));
  request.stop = parse_stop(body);
  if (present(body, "seed")) {
    if (!body.at("seed").is_number_integer()) fail_field("seed", "must be an integer");
    request.seed = body.at("seed").is_number_unsigned() ? body.at("seed").get<uint64_t>()
                                                        : static_cast<uint64_t>(body.at("seed").get<int64_t>());
  }
  request.n = integer_field(body, "n", 1, kMaxChoices).value_or(1);
  parse_logprobs(body, request);
  request.stream = bool_field(body, "stream");
  if (present(body, "stream_options")) {
    const Body& options = body.at("stream_options");
    if (!options.is_object()) fail_field("stream_options", "must be an object");
    if (!request.stream) fail_field("stream_options", "needs stream: true");
    request.include_usage = bool_field(options, "include_usage");
  }
  return request;
}

generate::SamplingOptions request_sampling(const CompletionRequest& request, const generate::SamplingOptions& base) {
  nlohmann::json fields = request.sampling;
  if (fields.contains("temperature")) fields["do_sample"] = fields["temperature"].get<double>() > 0.0;
  return generate::sampling_options_from_json(fields, "request", base);
}

}  // namespace surogate::serve
