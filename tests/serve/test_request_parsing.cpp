// Request parsing: each OpenAI field lands where it should; a bad one is a 400 naming it.
#include <gtest/gtest.h>

#include <string>

#include "serve/api_error.h"
#include "serve/request_parsing.h"

namespace surogate::serve {
namespace {

// The param of the ApiError parsing `body` throws ("" when none, "<no error>" when it parses).
std::string refused_param(const std::string& body, Endpoint endpoint = Endpoint::chat) {
  try {
    parse_request(body, endpoint);
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status(), 400);
    const nlohmann::json param = error.body()["error"]["param"];
    return param.is_null() ? "" : param.get<std::string>();
  }
  return "<no error>";
}

std::string chat(const std::string& more) {
  return R"({"model": "m", "messages": [{"role": "user", "content": "hi"}])" + more + "}";
}

TEST(RequestParsing, ChatFieldsAreRead) {
  const CompletionRequest request = parse_request(
      chat(R"(, "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "stop": ["a", "b"], "seed": 3, "n": 2,
            "logprobs": true, "top_logprobs": 4, "stream": true, "stream_options": {"include_usage": true},
            "chat_template_kwargs": {"enable_thinking": false}, "unknown_field": {"x": 1})"),
      Endpoint::chat);
  EXPECT_EQ(request.model, "m");
  ASSERT_EQ(request.messages.size(), 1u);
  EXPECT_EQ(request.messages[0]["content"], "hi");
  EXPECT_EQ(request.max_tokens, 7);
  EXPECT_EQ(request.sampling, (nlohmann::json{{"temperature", 0.5}, {"top_p", 0.9}}));
  EXPECT_EQ(request.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(request.seed, 3u);
  EXPECT_EQ(request.n, 2);
  EXPECT_EQ(request.logprobs, 4);
  EXPECT_TRUE(request.stream);
  EXPECT_TRUE(request.include_usage);
  EXPECT_EQ(request.enable_thinking, false);
}

TEST(RequestParsing, DefaultsWhenFieldsAreAbsentOrNull) {
  const CompletionRequest request = parse_request(chat(R"(, "temperature": null, "stop": null)"), Endpoint::chat);
  EXPECT_FALSE(request.max_tokens);
  EXPECT_TRUE(request.sampling.empty());
  EXPECT_TRUE(request.stop.empty());
  EXPECT_FALSE(request.seed);
  EXPECT_EQ(request.n, 1);
  EXPECT_FALSE(request.logprobs);
  EXPECT_FALSE(request.stream);
}

TEST(RequestParsing, ContentPartsAreJoinedAndMaxCompletionTokensCounts) {
  const CompletionRequest request = parse_request(
      R"({"model": "m", "max_completion_tokens": 5, "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})",
      Endpoint::chat);
  EXPECT_EQ(request.messages[0]["content"], "ab");
  EXPECT_EQ(request.max_tokens, 5);
}

TEST(RequestParsing, CompletionPromptsAreTextOrIds) {
  const CompletionRequest text = parse_request(R"({"model": "m", "prompt": "hello", "logprobs": 2})", Endpoint::completions);
  ASSERT_EQ(text.prompts.size(), 1U);
  EXPECT_EQ(text.prompts[0].text, "hello");
  EXPECT_EQ(text.logprobs, 2);
  const CompletionRequest ids = parse_request(R"({"model": "m", "prompt": [1, 2, 3], "stop": "x"})", Endpoint::completions);
  ASSERT_EQ(ids.prompts.size(), 1U);
  EXPECT_FALSE(ids.prompts[0].text);
  EXPECT_EQ(ids.prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ids.stop, (std::vector<std::string>{"x"}));
}

TEST(RequestParsing, ACompletionsRequestTakesAListOfPrompts) {
  const CompletionRequest texts = parse_request(R"({"model": "m", "prompt": ["a", "bc"]})", Endpoint::completions);
  ASSERT_EQ(texts.prompts.size(), 2U);
  EXPECT_EQ(texts.prompts[0].text, "a");
  EXPECT_EQ(texts.prompts[1].text, "bc");
  const CompletionRequest ids = parse_request(R"({"model": "m", "prompt": [[1, 2], [3]]})", Endpoint::completions);
  ASSERT_EQ(ids.prompts.size(), 2U);
  EXPECT_EQ(ids.prompts[0].ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(ids.prompts[1].ids, (std::vector<int32_t>{3}));
  EXPECT_FALSE(ids.prompts[1].text);
}

TEST(RequestParsing, BadFieldsAreNamed) {
  EXPECT_EQ(refused_param("[1]"), "");
  EXPECT_EQ(refused_param("{not json"), "");
  EXPECT_EQ(refused_param(R"({"messages": []})"), "model");
  EXPECT_EQ(refused_param(R"({"model": "m"})"), "messages");
  EXPECT_EQ(refused_param(R"({"model": "m", "messages": "hi"})"), "messages");
  EXPECT_EQ(refused_param(R"({"model": "m", "messages": [{"content": "hi"}]})"), "messages[0].role");
  EXPECT_EQ(refused_param(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"),
            "messages[0].content");
  EXPECT_EQ(refused_param(chat(R"(, "max_tokens": 0)")), "max_tokens");
  EXPECT_EQ(refused_param(chat(R"(, "max_tokens": 1.5)")), "max_tokens");
  EXPECT_EQ(refused_param(chat(R"(, "max_completion_tokens": -1)")), "max_completion_tokens");
  EXPECT_EQ(refused_param(chat(R"(, "temperature": 2.5)")), "temperature");
  EXPECT_EQ(refused_param(chat(R"(, "temperature": "hot")")), "temperature");
  EXPECT_EQ(refused_param(chat(R"(, "top_p": 0)")), "top_p");
  EXPECT_EQ(refused_param(chat(R"(, "stop": 3)")), "stop");
  EXPECT_EQ(refused_param(chat(R"(, "stop": ["a", "b", "c", "d", "e"])")), "stop");
  EXPECT_EQ(refused_param(chat(R"(, "stop": "")")), "stop");
  EXPECT_EQ(refused_param(chat(R"(, "seed": "x")")), "seed");
  EXPECT_EQ(refused_param(chat(R"(, "n": 0)")), "n");
  EXPECT_EQ(refused_param(chat(R"(, "n": 1000)")), "n");
  EXPECT_EQ(refused_param(chat(R"(, "top_logprobs": 2)")), "top_logprobs");
  EXPECT_EQ(refused_param(chat(R"(, "logprobs": true, "top_logprobs": 21)")), "top_logprobs");
  EXPECT_EQ(refused_param(chat(R"(, "stream": "yes")")), "stream");
  EXPECT_EQ(refused_param(chat(R"(, "stream_options": {"include_usage": true})")), "stream_options");
  EXPECT_EQ(refused_param(R"({"model": "m", "prompt": ["a", ""]})", Endpoint::completions), "prompt[1]");
  EXPECT_EQ(refused_param(R"({"model": "m", "prompt": ["a", 3]})", Endpoint::completions), "prompt[1]");
  EXPECT_EQ(refused_param(R"({"model": "m", "prompt": [[1], []]})", Endpoint::completions), "prompt[1]");
  EXPECT_EQ(refused_param(R"({"model": "m", "prompt": [[1], [-2]]})", Endpoint::completions), "prompt[1]");
  EXPECT_EQ(refused_param(R"({"model": "m", "prompt": [1, "a"]})", Endpoint::completions), "prompt");
  std::string prompts = "[";
  for (size_t index = 0; index <= kMaxPrompts; ++index) prompts += index == 0 ? "\"a\"" : ", \"a\"";
  prompts += "]";
  EXPECT_EQ(refused_param(R"({"model": "m", "prompt": )" + prompts + "}", Endpoint::completions), "prompt");
  EXPECT_EQ(refused_param(R"({"model": "m", "prompt": [-1]})", Endpoint::completions), "prompt");
  EXPECT_EQ(refused_param(R"({"model": "m", "prompt": ""})", Endpoint::completions), "prompt");
  EXPECT_EQ(refused_param(R"({"model": "m", "prompt": "a", "logprobs": true})", Endpoint::completions), "logprobs");
}

TEST(RequestParsing, FieldsThatWouldChangeTheOutputAreRefusedByName) {
  for (const char* field : {"tools", "tool_choice", "response_format", "functions"}) {
    EXPECT_EQ(refused_param(chat(std::string(", \"") + field + "\": {}")), field);
  }
  EXPECT_EQ(refused_param(chat(R"(, "logit_bias": {"5": 1})")), "logit_bias");
  EXPECT_EQ(refused_param(chat(R"(, "presence_penalty": 0.5)")), "presence_penalty");
  EXPECT_EQ(refused_param(chat(R"(, "frequency_penalty": 1)")), "frequency_penalty");
  EXPECT_EQ(refused_param(R"({"model": "m", "prompt": "a", "echo": true})", Endpoint::completions), "echo");
  EXPECT_EQ(refused_param(R"({"model": "m", "prompt": "a", "best_of": 3})", Endpoint::completions), "best_of");
  EXPECT_EQ(refused_param(R"({"model": "m", "prompt": "a", "suffix": "z"})", Endpoint::completions), "suffix");
  // Their neutral values change nothing and are accepted, as clients send them.
  EXPECT_EQ(refused_param(chat(R"(, "logit_bias": {}, "presence_penalty": 0, "frequency_penalty": 0)")), "<no error>");
}

TEST(RequestParsing, TemperatureDecidesGreedyOrSampling) {
  generate::SamplingOptions base;
  base.do_sample = true;
  base.temperature = 0.7;
  base.top_k = 20;
  const CompletionRequest greedy = parse_request(chat(R"(, "temperature": 0)"), Endpoint::chat);
  EXPECT_TRUE(request_sampling(greedy, base).greedy());
  const CompletionRequest hot =
      parse_request(chat(R"(, "temperature": 1.2, "top_p": 0.5, "min_p": 0.1, "top_k": -1)"), Endpoint::chat);
  const generate::SamplingOptions options = request_sampling(hot, base);
  EXPECT_FALSE(options.greedy());
  EXPECT_EQ(options.temperature, 1.2);
  EXPECT_EQ(options.top_p, 0.5);
  EXPECT_EQ(options.min_p, 0.1);
  EXPECT_EQ(options.top_k, 0);  // vLLM's -1: off
  const CompletionRequest kept = parse_request(chat(R"(, "temperature": 1.0)"), Endpoint::chat);
  EXPECT_EQ(request_sampling(kept, base).top_k, 20);  // the server's default stands
  const CompletionRequest plain = parse_request(chat(""), Endpoint::chat);
  EXPECT_EQ(request_sampling(plain, base), base);
}

}  // namespace
}  // namespace surogate::serve
