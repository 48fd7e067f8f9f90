// KTO rows (data/kto_formatter.h, data/kto_rows.h): TRL's KTOTrainer token layout on a byte codec
// (the prompt up to where prompt and prompt + completion diverge, the EOS text appended, loss on the
// completion), the chat form, the errors naming file and line, and the KL sequences: each row's
// prompt with the completion of the row before it in its chunk of `batch` rows (the chunk's first
// row taking the last's), each sequence cut to max_length.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "data/kto_formatter.h"
#include "data/kto_rows.h"
#include "data/packing.h"
#include "test_helpers.h"
#include "user_error_of.h"

namespace surogate::data {
namespace {

std::vector<int32_t> kto_bytes(const std::string& text) { return testing::bytes_of(text); }

Row kto_row(RowValue value) { return testing::row_at(std::move(value), "rows.jsonl", 3); }

DatasetConfig kto_dataset() {
  DatasetConfig dataset;
  dataset.type = DatasetType::Kto;
  return dataset;
}

TokenizedSample formatted_kto(RowValue value, size_t max_length = 64) {
  FormattedRow formatted = format_kto_row(kto_dataset(), testing::byte_codec(), {}, kto_row(std::move(value)), max_length);
  EXPECT_TRUE(formatted.sample);
  return *formatted.sample;
}

size_t loss_tokens_of(const std::vector<int32_t>& labels) {
  size_t count = 0;
  for (int32_t label : labels) count += label != kIgnoreLabel ? 1 : 0;
  return count;
}

TEST(KtoFormatter, TextRowAsTrlBuildsIt) {
  const TokenizedSample sample = formatted_kto({{"prompt", "ab"}, {"completion", "cd"}, {"label", false}});
  EXPECT_EQ(sample.input_ids, kto_bytes("abcd<eos>"));
  EXPECT_EQ(sample.kto_label, 0);
  EXPECT_EQ(sample.first_part, 0);  // one document until the split's rows are paired with their KL completions
  for (size_t i = 0; i < sample.labels.size(); ++i) {
    EXPECT_EQ(sample.labels[i], i < 2 ? kIgnoreLabel : sample.input_ids[i]) << i;
  }
}

TEST(KtoFormatter, ChatRowUsesTheGenerationPromptAndFieldNames) {
  const Row row = kto_row({{"question", {{{"role", "user"}, {"content", "hi"}}}},
                           {"answer", {{{"role", "assistant"}, {"content", "yo"}}}},
                           {"good", true}});
  DatasetConfig dataset = kto_dataset();
  dataset.prompt_field = "question";
  dataset.completion_field = "answer";
  dataset.label_field = "good";
  const FormattedRow formatted = format_kto_row(dataset, testing::byte_codec(), testing::chatml_renderer(), row, 64);
  ASSERT_TRUE(formatted.sample);
  EXPECT_EQ(formatted.sample->input_ids, kto_bytes("<|user|>hi<|end|>\n<|assistant|>yo<|end|>\n"));
  EXPECT_EQ(loss_tokens_of(formatted.sample->labels), std::string("yo<|end|>\n").size());
  EXPECT_EQ(formatted.sample->kto_label, 1);
}

TEST(KtoFormatter, BadRowsNameFileAndLine) {
  const auto error = [](RowValue value, size_t max_length = 64) {
    return error_of([&] { format_kto_row(kto_dataset(), testing::byte_codec(), {}, kto_row(value), max_length); });
  };
  EXPECT_NE(error({{"prompt", "a"}, {"completion", "b"}}).find("rows.jsonl:3: the kto row has no 'label'"),
            std::string::npos);
  EXPECT_NE(error({{"prompt", "a"}, {"completion", "b"}, {"label", 1}}).find("rows.jsonl:3: 'label' (label_field) must be"),
            std::string::npos);
  EXPECT_NE(error({{"prompt", "a"}, {"label", true}}).find("rows.jsonl:3: the kto row has no 'completion'"),
            std::string::npos);
  EXPECT_NE(error({{"prompt", "a"}, {"completion", ""}, {"label", true}}).find("'completion' (completion_field) is empty"),
            std::string::npos);
  EXPECT_NE(error({{"prompt", "abcdef"}, {"completion", "x"}, {"label", true}}, 6).find("rows.jsonl:3: the prompt alone "
                                                                                          "is 6 tokens, which fills "
                                                                                          "max_length (6)"),
            std::string::npos);
  EXPECT_NE(error({{"prompt", {{{"role", "user"}, {"content", "a"}}}}, {"completion", "x"}, {"label", true}})
                .find("need a chat template"),
            std::string::npos);
}

TEST(KtoFormatter, KeepsUpToMaxLengthCompletionTokens) {
  // As another row's KL completion the completion may follow a shorter prompt: max_length of its tokens are kept.
  const TokenizedSample sample = formatted_kto({{"prompt", "abc"}, {"completion", "0123456789"}, {"label", true}}, 6);
  EXPECT_EQ(sample.input_ids, kto_bytes("abc012345"));
}

// A formatted row: prompt bytes, then completion bytes (labelled).
TokenizedSample kto_document(const std::string& prompt, const std::string& completion, int8_t label) {
  TokenizedSample document;
  for (char c : prompt) {
    document.input_ids.push_back(c);
    document.labels.push_back(kIgnoreLabel);
  }
  for (char c : completion) {
    document.input_ids.push_back(c);
    document.labels.push_back(c);
  }
  document.kto_label = label;
  return document;
}

TEST(KtoRows, KlCompletionsRotateByOneWithinEachChunk) {
  std::vector<TokenizedSample> rows{kto_document("P", "a", 1), kto_document("Q", "bb", 0), kto_document("R", "ccc", 1),
                                    kto_document("S", "d", 0), kto_document("T", "ee", 1)};
  add_kl_completions(rows, 3, 8);
  ASSERT_EQ(rows.size(), 5u);
  // Chunks {P, Q, R} and {S, T}: (x_1, y_n), (x_2, y_1), ..., as TRL's add_kl_completion_ids.
  const std::vector<std::string> expected{"Pa" "Pccc", "Qbb" "Qa", "Rccc" "Rbb", "Sd" "See", "Tee" "Td"};
  const std::vector<int32_t> first_parts{2, 3, 4, 2, 3};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].input_ids, kto_bytes(expected[i])) << i;
    EXPECT_EQ(rows[i].first_part, first_parts[i]) << i;
    EXPECT_EQ(rows[i].labels[0], kIgnoreLabel);
    EXPECT_EQ(rows[i].labels[static_cast<size_t>(first_parts[i])], kIgnoreLabel);  // the KL sequence's prompt
    EXPECT_EQ(loss_tokens_of(rows[i].labels), expected[i].size() - 2) << i;
  }
  EXPECT_EQ(kto_label_string(rows), "10101");
}

TEST(KtoRows, EachSequenceIsCutToMaxLength) {
  std::vector<TokenizedSample> rows{kto_document("PPP", "abcdef", 1), kto_document("Q", "uvwxyz", 0)};
  add_kl_completions(rows, 2, 4);
  EXPECT_EQ(rows[0].input_ids, kto_bytes("PPPa" "PPPu"));
  EXPECT_EQ(rows[1].input_ids, kto_bytes("Quvw" "Qabc"));
  EXPECT_EQ(rows[0].first_part, 4);
}

TEST(KtoRows, OtherDocumentsAreRefused) {
  std::vector<TokenizedSample> rows{kto_document("P", "a", 1), kto_document("Q", "b", -1)};
  EXPECT_THROW(add_kl_completions(rows, 2, 8), UserError);
}

TEST(KtoPacking, KeepOrderPutsDocumentIInRowI) {
  std::vector<TokenizedSample> documents;
  for (int32_t i = 1; i <= 6; ++i) documents.push_back(kto_document(std::string(1, static_cast<char>('A' + i)), "x", 1));
  PackingOptions options{4, PackingMode::OnePerRow, false, testing::kPad, 99};
  options.keep_order = true;
  PackingStats stats;
  const PackedRows rows = pack_documents(documents, options, stats);
  ASSERT_EQ(rows.rows(), 6u);
  for (size_t row = 0; row < 6; ++row) EXPECT_EQ(rows.input_ids[row * 4], 'A' + static_cast<int32_t>(row) + 1) << row;
}

}  // namespace
}  // namespace surogate::data
