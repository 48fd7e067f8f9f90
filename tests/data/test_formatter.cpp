// Formatters: exact ids and label masks per dataset type, with a byte-level codec.
#include <gtest/gtest.h>

#include "core/error.h"
#include "data/formatter.h"
#include "test_helpers.h"

namespace surogate::data {
namespace {

using testing::byte_codec;
using testing::chatml_renderer;
using testing::kEos;

Row make_row(nlohmann::json value) { return Row{std::move(value), RowOrigin{"data.jsonl", 7, true}}; }

std::string loss_text(const TokenizedSample& sample) {
  std::string text;
  for (int32_t label : sample.labels) {
    if (label != kIgnoreLabel && label < 256) text += static_cast<char>(label);
  }
  return text;
}

TEST(Formatter, TextPutsLossOnEveryTokenButTheFirstAndAppendsEos) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Text;
  Formatter formatter(dataset, {}, byte_codec(), {});
  FormattedRow row = formatter.format(make_row({{"text", "abc"}}));
  ASSERT_TRUE(row.sample);
  EXPECT_EQ(row.sample->input_ids, (std::vector<int32_t>{'a', 'b', 'c', kEos}));
  EXPECT_EQ(row.sample->labels, (std::vector<int32_t>{kIgnoreLabel, 'b', 'c', kEos}));
}

TEST(Formatter, EmptyTextIsDroppedWithAReason) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Text;
  Formatter formatter(dataset, {}, byte_codec(), {});
  FormattedRow row = formatter.format(make_row({{"text", ""}}));
  EXPECT_FALSE(row.sample);
  EXPECT_EQ(row.drop_reason, "empty text");
}

TEST(Formatter, MissingFieldNamesFileLineAndOption) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Text;
  Formatter formatter(dataset, {}, byte_codec(), {});
  try {
    formatter.format(make_row({{"body", "x"}}));
    FAIL();
  } catch (const UserError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("data.jsonl:7"), std::string::npos) << message;
    EXPECT_NE(message.find("text_field"), std::string::npos) << message;
    EXPECT_NE(message.find("body"), std::string::npos) << message;
  }
}

TEST(Formatter, WrongTypeAndBadUtf8AreUserErrors) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Text;
  Formatter formatter(dataset, {}, byte_codec(), {});
  EXPECT_THROW(formatter.format(make_row({{"text", 5}})), UserError);
  nlohmann::json bad = nlohmann::json::object();
  bad["text"] = std::string("ok \xff\xfe");
  EXPECT_THROW(formatter.format(make_row(bad)), UserError);
}

TEST(Formatter, InstructionPromptFormatMasksThePrompt) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Instruction;
  dataset.instruction_field = "q";
  dataset.output_field = "a";
  dataset.input_field = "ctx";
  dataset.system_prompt_type = SystemPromptType::Fixed;
  dataset.system_prompt = "S";
  dataset.prompt_format = "{system}|{instruction}|{input}|{output}!";
  dataset.prompt_format_no_input = "{system}|{instruction}|{output}";
  Formatter formatter(dataset, {}, byte_codec(), {});
  FormattedRow with_input = formatter.format(make_row({{"q", "Q{input}"}, {"a", "A"}, {"ctx", "C"}}));
  ASSERT_TRUE(with_input.sample);
  EXPECT_EQ(with_input.text, "S|Q{input}|C|A!");  // placeholders inside values are not replaced
  EXPECT_EQ(loss_text(*with_input.sample), "A!");
  EXPECT_EQ(with_input.sample->input_ids.back(), kEos);
  EXPECT_EQ(with_input.sample->labels.back(), kEos);
  FormattedRow without_input = formatter.format(make_row({{"q", "Q"}, {"a", "A"}}));
  EXPECT_EQ(without_input.text, "S|Q|A");
}

TEST(Formatter, InstructionThroughChatTemplateTrainsOnTheAssistantTurn) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Instruction;
  dataset.instruction_field = "instruction";
  dataset.output_field = "output";
  dataset.system_prompt_type = SystemPromptType::Field;
  dataset.system_prompt_field = "sys";
  Formatter formatter(dataset, {}, byte_codec(), chatml_renderer());
  FormattedRow row = formatter.format(make_row({{"instruction", "hi"}, {"output", "yo"}, {"sys", "be brief"}}));
  ASSERT_TRUE(row.sample);
  EXPECT_EQ(row.text, "<|system|>be brief<|end|>\n<|user|>hi<|end|>\n<|assistant|>yo<|end|>\n");
  EXPECT_EQ(loss_text(*row.sample), "yo<|end|>\n");
}

TEST(Formatter, ShareGptConversationMapsRolesAndMasksEveryAssistantTurn) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Conversation;
  dataset.messages_field = "conversations";
  Formatter formatter(dataset, {}, byte_codec(), chatml_renderer());
  nlohmann::json conversation = nlohmann::json::array({{{"from", "human"}, {"value", "a"}},
                                                       {{"from", "gpt"}, {"value", "b"}},
                                                       {{"from", "human"}, {"value", "c"}},
                                                       {{"from", "gpt"}, {"value", "d"}}});
  FormattedRow row = formatter.format(make_row({{"conversations", conversation}}));
  ASSERT_TRUE(row.sample);
  EXPECT_EQ(row.text, "<|user|>a<|end|>\n<|assistant|>b<|end|>\n<|user|>c<|end|>\n<|assistant|>d<|end|>\n");
  EXPECT_EQ(loss_text(*row.sample), "b<|end|>\nd<|end|>\n");
  EXPECT_FALSE(row.tokenization_differs);
}

TEST(Formatter, TrainOnInputsPutsLossEverywhere) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Conversation;
  FormatOptions options;
  options.train_on_inputs = true;
  Formatter formatter(dataset, options, byte_codec(), chatml_renderer());
  nlohmann::json messages = nlohmann::json::array({{{"role", "user"}, {"content", "a"}}, {{"role", "assistant"}, {"content", "b"}}});
  FormattedRow row = formatter.format(make_row({{"messages", messages}}));
  ASSERT_TRUE(row.sample);
  EXPECT_EQ(loss_text(*row.sample), row.text.substr(1));
}


// The conversation user a, assistant b, user c, assistant d, rendered by `renderer`.
FormattedRow format_two_rounds(const ChatRenderer& renderer) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Conversation;
  Formatter formatter(dataset, {}, byte_codec(), renderer);
  nlohmann::json messages = nlohmann::json::array({{{"role", "user"}, {"content", "a"}},
                                                   {{"role", "assistant"}, {"content", "b"}},
                                                   {{"role", "user"}, {"content", "c"}},
                                                   {{"role", "assistant"}, {"content", "d"}}});
  return formatter.format(make_row({{"messages", messages}}));
}

TEST(Formatter, TemplateThatRendersTheLastTurnDifferentlyStillGetsExactMasks) {
  // Like Qwen3: the final assistant turn gets a "<think></think>" block, earlier ones do not.
  ChatRenderer renderer = [](const nlohmann::json& messages, const nlohmann::json&, bool generation_prompt) {
    std::string text;
    for (size_t i = 0; i < messages.size(); ++i) {
      const auto& m = messages[i];
      bool last = i + 1 == messages.size();
      text += "<" + m["role"].get<std::string>() + ">";
      if (m["role"] == "assistant" && last) text += "<think></think>";
      text += m["content"].get<std::string>() + "</>";
    }
    if (generation_prompt) text += "<assistant>";
    return text;
  };
  FormattedRow row = format_two_rounds(renderer);
  ASSERT_TRUE(row.sample);
  EXPECT_EQ(row.text, "<user>a</><assistant>b</><user>c</><assistant><think></think>d</>");
  EXPECT_EQ(loss_text(*row.sample), "b</><think></think>d</>");
}

TEST(Formatter, TextATemplateWritesAfterEveryConversationIsNotPartOfATurn) {
  // Like the original Llama 3 template: an assistant header ends every rendering.
  ChatRenderer renderer = [](const nlohmann::json& messages, const nlohmann::json&, bool) {
    std::string text;
    for (const auto& m : messages) {
      text += "<" + m["role"].get<std::string>() + ">" + m["content"].get<std::string>() + "</>";
    }
    return text + "<assistant>";
  };
  FormattedRow row = format_two_rounds(renderer);
  ASSERT_TRUE(row.sample);
  EXPECT_EQ(row.text, "<user>a</><assistant>b</><user>c</><assistant>d</><assistant>");
  EXPECT_EQ(loss_text(*row.sample), "b</>d</>");
}

TEST(Formatter, BadConversationsAreUserErrors) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Conversation;
  Formatter formatter(dataset, {}, byte_codec(), chatml_renderer());
  EXPECT_THROW(formatter.format(make_row({{"messages", nlohmann::json::array()}})), UserError);
  EXPECT_THROW(formatter.format(make_row({{"messages", "hi"}})), UserError);
  try {
    formatter.format(make_row({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}));
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown role 'wizard'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("data.jsonl:7"), std::string::npos) << e.what();
  }
  FormattedRow no_assistant = formatter.format(make_row({{"messages", {{{"role", "user"}, {"content", "x"}}}}}));
  EXPECT_EQ(no_assistant.drop_reason, "no assistant turn");
}

TEST(Formatter, AutoDetectsTheFormatFromTheFirstRow) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Auto;
  Formatter conversation(dataset, {}, byte_codec(), chatml_renderer());
  conversation.format(make_row({{"conversations", {{{"from", "human"}, {"value", "a"}}, {{"from", "gpt"}, {"value", "b"}}}}}));
  EXPECT_EQ(conversation.resolved_type(), "conversation");
  Formatter instruction(dataset, {false, std::nullopt, false}, byte_codec(), {});
  instruction.format(make_row({{"instruction", "a"}, {"output", "b"}}));
  EXPECT_EQ(instruction.resolved_type(), "instruction");
  Formatter text(dataset, {}, byte_codec(), {});
  text.format(make_row({{"text", "a"}}));
  EXPECT_EQ(text.resolved_type(), "text");
  Formatter unknown(dataset, {}, byte_codec(), {});
  EXPECT_THROW(unknown.format(make_row({{"foo", "a"}})), UserError);
}

}  // namespace
}  // namespace surogate::data
