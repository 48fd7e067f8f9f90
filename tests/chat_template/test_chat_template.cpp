// The ChatTemplate API: template selection from tokenizer configs, built-ins, the system
// override, generation spans, and the real Qwen3 / Llama 3 templates (tests/fixtures/tokenizers).
#include <gtest/gtest.h>

#include <filesystem>

#include "chat_template/chat_template.h"
#include "core/error.h"

namespace surogate::chat_template {
namespace {

OrderedJson conversation() {
  return OrderedJson::parse(R"([{"role": "system", "content": "Sys."}, {"role": "user", "content": "Hi"},
                                {"role": "assistant", "content": "Hello!"}])");
}

std::filesystem::path tokenizer_directory(const std::string& model) {
  std::filesystem::path directory = std::filesystem::path(SUROGATE_TOKENIZERS_DIR) / model;
  if (!std::filesystem::exists(directory / "tokenizer_config.json"))
    ADD_FAILURE() << "missing unpacked tokenizer (build the surogate_test_tokenizers target): " << directory;
  return directory;
}

TEST(ChatTemplate, PicksDefaultAndToolUseVariants) {
  nlohmann::json config = nlohmann::json::parse(R"({"chat_template": [
      {"name": "default", "template": "plain"}, {"name": "tool_use", "template": "tools:{{ tools | length }}"}],
      "eos_token": {"content": "</s>"}})");
  ChatTemplate chat = ChatTemplate::from_tokenizer_config(config);
  ChatRenderInput input;
  EXPECT_EQ(chat.render(input), "plain");
  input.tools = OrderedJson::parse(R"([{"name": "f"}])");
  EXPECT_EQ(chat.render(input), "tools:1");
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(nlohmann::json::parse(R"({"chat_template": "{{ eos_token }}",
                                                                          "eos_token": {"content": "</s>"}})"))
                .render(ChatRenderInput{}),
            "</s>");
  EXPECT_THROW(ChatTemplate::from_tokenizer_config(nlohmann::json::parse(R"({"eos_token": "x"})")), UserError);
}

TEST(ChatTemplate, BuiltinsRenderAndMarkAssistantSpans) {
  ChatRenderInput input;
  input.messages = conversation();
  RenderedChat chatml = ChatTemplate::builtin("chatml").render_with_spans(input);
  EXPECT_EQ(chatml.text,
            "<|im_start|>system\nSys.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!"
            "<|im_end|>\n");
  ASSERT_EQ(chatml.generation_spans.size(), 1u);
  const TextSpan span = chatml.generation_spans[0];
  EXPECT_EQ(chatml.text.substr(span.begin, span.end - span.begin), "Hello!<|im_end|>");

  EXPECT_EQ(ChatTemplate::builtin("llama2").render(input), "<s>[INST] <<SYS>>\nSys.\n<</SYS>>\n\nHi [/INST] Hello! </s>");
  EXPECT_EQ(ChatTemplate::builtin("mistral").render(input), "<s>[INST] Sys.\n\nHi [/INST]Hello!</s>");
  EXPECT_EQ(ChatTemplate::builtin("alpaca").render(input),
            "Sys.\n\n### Instruction:\nHi\n\n### Response:\nHello!</s>\n\n");
  input.add_generation_prompt = true;
  input.messages = OrderedJson::parse(R"([{"role": "user", "content": " Hi "}])");
  EXPECT_EQ(ChatTemplate::builtin("llama3").render(input),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  for (const auto& name : ChatTemplate::builtin_template_names()) EXPECT_NO_THROW(ChatTemplate::builtin(name));
  try {
    ChatTemplate::builtin("chatlm");
    FAIL();
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("did you mean 'chatml'"), std::string::npos);
  }
}

TEST(ChatTemplate, SystemOverrideReplacesOrInserts) {
  OrderedJson replaced = apply_system_prompt(conversation(), "New.");
  EXPECT_EQ(replaced.size(), 3u);
  EXPECT_EQ(replaced[0]["content"], "New.");
  OrderedJson inserted = apply_system_prompt(OrderedJson::parse(R"([{"role": "user", "content": "Hi"}])"), "New.");
  ASSERT_EQ(inserted.size(), 2u);
  EXPECT_EQ(inserted[0]["role"], "system");
  EXPECT_EQ(inserted[1]["content"], "Hi");
}

TEST(ChatTemplate, RealQwen3Template) {
  ChatTemplate chat = ChatTemplate::from_tokenizer_directory(tokenizer_directory("qwen3"));
  ChatRenderInput input;
  input.messages = OrderedJson::parse(R"([{"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Hello", "reasoning_content": "greet"}])");
  EXPECT_EQ(chat.render(input), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\ngreet\n</think>\n\n"
                                "Hello<|im_end|>\n");
  input.messages = OrderedJson::parse(R"([{"role": "user", "content": "Hi"}])");
  input.add_generation_prompt = true;
  input.extra_variables = OrderedJson::parse(R"({"enable_thinking": false})");
  EXPECT_EQ(chat.render(input), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplate, RealLlama3TemplateUsesBosFromConfig) {
  ChatTemplate chat = ChatTemplate::from_tokenizer_directory(tokenizer_directory("llama3"));
  ChatRenderInput input;
  input.messages = OrderedJson::parse(R"([{"role": "user", "content": "Hi "}])");
  EXPECT_EQ(chat.render(input), "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                                "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_THROW(ChatTemplate::from_tokenizer_directory(tokenizer_directory("llama2")), UserError);
}

}  // namespace
}  // namespace surogate::chat_template
