// `type: prompt` rows (src/data/prompt_rows.h): string and chat prompts, the other columns kept,
// left truncation at max_prompt_length, and each refusal naming the file and line.
#include <gtest/gtest.h>

#include "core/error.h"
#include "data/prompt_rows.h"
#include "data/row_reader.h"
#include "test_helpers.h"

namespace surogate::data {
namespace {

std::vector<Row> read_rows(const std::string& name, const std::string& content) {
  const auto file = testing::write_file(testing::fresh_dir(name) / "prompts.jsonl", content);
  std::unique_ptr<RowReader> reader = open_row_reader({file});
  std::vector<Row> rows;
  for (Row row; reader->next(row);) rows.push_back(row);
  return rows;
}

std::string error_of(const Row& row, const ChatRenderer& renderer = testing::chatml_renderer()) {
  try {
    read_prompt_row(row, testing::byte_codec(), renderer);
  } catch (const UserError& error) {
    return error.what();
  }
  return "";
}

TEST(PromptRows, AStringPromptIsFedAsItIsAndTheOtherColumnsAreKept) {
  const std::vector<Row> rows = read_rows("string", R"({"prompt": "2+3=", "answer": "5", "level": 1})" "\n");
  const PromptRow row = read_prompt_row(rows.at(0), testing::byte_codec(), testing::chatml_renderer());
  EXPECT_EQ(row.text, "2+3=");
  EXPECT_EQ(row.prompt, "2+3=");
  EXPECT_EQ(row.prompt_ids, (std::vector<int32_t>{'2', '+', '3', '='}));
  EXPECT_EQ(row.columns.dump(), R"({"answer":"5","level":1})");
  EXPECT_EQ(row.origin.number, 1u);
}

TEST(PromptRows, ChatMessagesAreRenderedWithTheGenerationPrompt) {
  const std::vector<Row> rows =
      read_rows("chat", R"({"prompt": [{"role": "user", "content": "hi"}], "answer": 7})" "\n");
  const PromptRow row = read_prompt_row(rows.at(0), testing::byte_codec(), testing::chatml_renderer());
  EXPECT_EQ(row.text, "<|user|>hi<|end|>\n<|assistant|>");
  EXPECT_TRUE(row.prompt.is_array());
  EXPECT_EQ(row.prompt_ids.size(), row.text.size());
  EXPECT_EQ(row.columns["answer"], 7);
}

TEST(PromptRows, MaxPromptLengthKeepsTheLastTokens) {
  const std::vector<Row> rows = read_rows("truncate", R"({"prompt": "abcdef"})" "\n");
  const PromptRow row = read_prompt_row(rows.at(0), testing::byte_codec(), {}, 3);
  EXPECT_EQ(row.prompt_ids, (std::vector<int32_t>{'d', 'e', 'f'}));
}

TEST(PromptRows, BadRowsNameTheirFileAndLine) {
  const std::vector<Row> rows = read_rows("bad", "{\"prompt\": \"ok\"}\n{\"question\": \"x\"}\n{\"prompt\": 3}\n"
                                                 "{\"prompt\": []}\n{\"prompt\": [{\"content\": \"x\"}]}\n"
                                                 "{\"prompt\": [{\"role\": \"user\", \"content\": \"x\"}]}\n"
                                                 "{\"prompt\": \"\"}\n");
  EXPECT_EQ(error_of(rows.at(0)), "");
  EXPECT_NE(error_of(rows.at(1)).find("prompts.jsonl:2: a `type: prompt` row needs a 'prompt' column"), std::string::npos)
      << error_of(rows.at(1));
  EXPECT_NE(error_of(rows.at(2)).find("prompts.jsonl:3: 'prompt' must be a string or a list of chat messages but is a number"),
            std::string::npos) << error_of(rows.at(2));
  EXPECT_NE(error_of(rows.at(3)).find("prompts.jsonl:4: the prompt messages in 'prompt' are empty"), std::string::npos);
  EXPECT_NE(error_of(rows.at(4)).find("prompts.jsonl:5: message 0 of 'prompt' is not a"), std::string::npos);
  EXPECT_NE(error_of(rows.at(5), {}).find("prompts.jsonl:6: the prompt is chat messages but the model has no chat template"),
            std::string::npos);
  EXPECT_NE(error_of(rows.at(6)).find("prompts.jsonl:7: the prompt in 'prompt' is empty"), std::string::npos);
}

}  // namespace
}  // namespace surogate::data
