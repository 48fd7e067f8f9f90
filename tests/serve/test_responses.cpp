// Response shapes: chat and completions objects, chunks, usage, logprobs, server-sent events.
#include <gtest/gtest.h>

#include <filesystem>

#include "serve/responses.h"
#include "tokenizer/tokenizer.h"

namespace surogate::serve {
namespace {

const tokenizer::Tokenizer& qwen3() {
  static const tokenizer::Tokenizer codec =
      tokenizer::Tokenizer::load(std::filesystem::path(SUROGATE_TOKENIZERS_DIR) / "qwen3");
  return codec;
}

TEST(Responses, ChatCompletionHasMessageUsageAndLogprobs) {
  const ResponseHeader header{Endpoint::chat, "chatcmpl-1", 5, "m"};
  Choice choice{"Hi", "stop", std::vector<TokenLogprobs>{{13048, {-0.5, {{13048, -0.5}, {9707, -1.0}}}}}, 1};
  const nlohmann::json body = complete_response(header, std::span<const Choice>(&choice, 1), {3, 1}, qwen3());
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hi");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["total_tokens"], 4);
  const nlohmann::json& entry = body["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(entry["logprob"], -0.5);
  EXPECT_EQ(entry["token"], qwen3().decode(std::vector<int32_t>{13048}, false));
  EXPECT_EQ(entry["top_logprobs"].size(), 2u);
  EXPECT_EQ(entry["bytes"].size(), entry["token"].get<std::string>().size());
}

TEST(Responses, CompletionsUseTheLegacyLogprobsForm) {
  const ResponseHeader header{Endpoint::completions, "cmpl-1", 5, "m"};
  Choice choice{"ab", "length", std::vector<TokenLogprobs>{{64, {-0.1, {{64, -0.1}}}}, {65, {-0.2, {}}}}, 2};
  const nlohmann::json body = complete_response(header, std::span<const Choice>(&choice, 1), {1, 2}, qwen3());
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "ab");
  const nlohmann::json& logprobs = body["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"].size(), 2u);
  EXPECT_EQ(logprobs["token_logprobs"][1], -0.2);
  EXPECT_EQ(logprobs["text_offset"][0], 0);
  EXPECT_EQ(logprobs["text_offset"][1], logprobs["tokens"][0].get<std::string>().size());
  Choice plain{"x", "stop", std::nullopt, 1};
  EXPECT_TRUE(complete_response(header, std::span<const Choice>(&plain, 1), {1, 1}, qwen3())["choices"][0]["logprobs"]
                  .is_null());
}

TEST(Responses, ChunksAndEvents) {
  const ResponseHeader header{Endpoint::chat, "chatcmpl-1", 5, "m"};
  const nlohmann::json first = chunk(header, 1, "He", true, std::nullopt, "", qwen3(), 0);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["index"], 1);
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "He");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const nlohmann::json last = chunk(header, 1, "", false, std::nullopt, "length", qwen3(), 2);
  EXPECT_FALSE(last["choices"][0]["delta"].contains("content"));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  const nlohmann::json usage = usage_chunk(header, {2, 3});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 3);
  EXPECT_EQ(sse_event(nlohmann::json{{"a", 1}}), "data: {\"a\":1}\n\n");
  const ResponseHeader legacy{Endpoint::completions, "cmpl-1", 5, "m"};
  EXPECT_EQ(chunk(legacy, 0, "x", true, std::nullopt, "", qwen3(), 0)["object"], "text_completion");
  EXPECT_EQ(new_header(Endpoint::chat, "m").id.rfind("chatcmpl-", 0), 0u);
}

}  // namespace
}  // namespace surogate::serve
