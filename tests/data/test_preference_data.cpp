// Preference pairs (data/preference_formatter.h): TRL's token layout on a byte codec (prompt and
// prompt + completion tokenized apart, EOS text appended, the completion from where they diverge,
// each sequence cut to max_length, loss on the completion), the chat form with the generation
// prompt, the errors naming file and line, and the packer writing a pair as two documents of one row.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "data/packing.h"
#include "data/preference_formatter.h"
#include "test_helpers.h"

namespace surogate::data {
namespace {

using testing::bytes_of;

Row preference_row(RowValue value) { return testing::row_at(std::move(value), "pairs.jsonl", 7); }

DatasetConfig preference_dataset() {
  DatasetConfig dataset;
  dataset.type = DatasetType::Preference;
  return dataset;
}

TEST(PreferenceFormatter, TextPairAsTrlBuildsIt) {
  const Row row = preference_row({{"prompt", "ab"}, {"chosen", "c"}, {"rejected", "de<eos>"}});
  const FormattedRow formatted = format_preference_row(preference_dataset(), testing::byte_codec(), {}, row, 6);
  ASSERT_TRUE(formatted.sample);
  const TokenizedSample& sample = *formatted.sample;
  // chosen: "abc" + "<eos>" text, cut to 6; rejected already ends with the EOS text: "abde<eos>" cut to 6.
  const std::vector<int32_t> chosen = bytes_of("abc<eo"), rejected = bytes_of("abde<e");
  std::vector<int32_t> expected = chosen;
  expected.insert(expected.end(), rejected.begin(), rejected.end());
  EXPECT_EQ(sample.input_ids, expected);
  EXPECT_EQ(sample.first_part, 6);
  for (size_t i = 0; i < expected.size(); ++i) {
    const bool prompt = i % 6 < 2;
    EXPECT_EQ(sample.labels[i], prompt ? kIgnoreLabel : expected[i]) << i;
  }
}

TEST(PreferenceFormatter, ChatPairUsesTheGenerationPromptAndFieldNames) {
  DatasetConfig dataset = preference_dataset();
  dataset.prompt_field = "question";
  dataset.chosen_field = "good";
  dataset.rejected_field = "bad";
  const Row row = preference_row({{"question", {{{"role", "user"}, {"content", "hi"}}}},
                                  {"good", {{{"role", "assistant"}, {"content", "yo"}}}},
                                  {"bad", {{{"role", "assistant"}, {"content", "no"}}}}});
  const FormattedRow formatted =
      format_preference_row(dataset, testing::byte_codec(), testing::chatml_renderer(), row, 64);
  ASSERT_TRUE(formatted.sample);
  const std::string prompt = "<|user|>hi<|end|>\n<|assistant|>";
  const std::vector<int32_t> chosen = bytes_of(prompt + "yo<|end|>\n");
  ASSERT_EQ(formatted.sample->first_part, static_cast<int32_t>(chosen.size()));
  EXPECT_EQ(std::vector<int32_t>(formatted.sample->input_ids.begin(), formatted.sample->input_ids.begin() + formatted.sample->first_part),
            chosen);
  size_t loss_tokens = 0;
  for (int32_t label : formatted.sample->labels) loss_tokens += label != kIgnoreLabel ? 1 : 0;
  EXPECT_EQ(loss_tokens, 2 * std::string("yo<|end|>\n").size());
}

TEST(PreferenceFormatter, BadRowsNameFileAndLine) {
  const auto error = [](RowValue value, size_t max_length = 64) {
    try {
      format_preference_row(preference_dataset(), testing::byte_codec(), {}, preference_row(std::move(value)), max_length);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error({{"prompt", "a"}, {"rejected", "b"}}).find("pairs.jsonl:7: the preference row has no 'chosen'"),
            std::string::npos);
  EXPECT_NE(error({{"prompt", "a"}, {"chosen", ""}, {"rejected", "b"}}).find("pairs.jsonl:7: 'chosen' (chosen_field) is empty"),
            std::string::npos);
  EXPECT_NE(error({{"prompt", "abcdef"}, {"chosen", "x"}, {"rejected", "y"}}, 6).find("fills max_length (6)"),
            std::string::npos);
  EXPECT_NE(error({{"prompt", {{{"role", "user"}, {"content", "a"}}}}, {"chosen", "x"}, {"rejected", "y"}})
                .find("need a chat template"),
            std::string::npos);
}

TEST(PreferencePacking, APairIsTwoDocumentsOfOneRow) {
  TokenizedSample pair;
  pair.input_ids = {1, 2, 3, 4, 1, 2, 5};
  pair.labels = {kIgnoreLabel, kIgnoreLabel, 3, 4, kIgnoreLabel, kIgnoreLabel, 5};
  pair.first_part = 4;
  PackingStats stats;
  const PackedRows rows = pack_documents({pair}, PackingOptions{10, PackingMode::OnePerRow, false, testing::kPad, 0}, stats);
  ASSERT_EQ(rows.rows(), 1u);
  EXPECT_EQ(rows.segment_lengths, (std::vector<int32_t>{4, 3, -3}));
  EXPECT_EQ(rows.position_ids, (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 0, 0, 0}));
  EXPECT_EQ(stats.loss_tokens, 3u);
  const PackedBatch batch = make_batch(view_of(rows), std::vector<uint64_t>{0, 1}, testing::kPad);
  EXPECT_EQ(batch.rows, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(batch.document_ids[3], batch.document_ids[0]);
  EXPECT_NE(batch.document_ids[4], batch.document_ids[3]);  // the rejected sequence is its own document
}

}  // namespace
}  // namespace surogate::data
