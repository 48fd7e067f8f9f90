// Pre-tokenized JSONL reading, label shifting and first-fit packing into [B, T] batches.
#include <gtest/gtest.h>

#include <fstream>
#include <unistd.h>

#include "core/error.h"
#include "models/token_batches.h"
#include "user_error_of.h"

namespace surogate::models {
namespace {

namespace fs = std::filesystem;

fs::path write_file(const std::string& name, const std::string& text) {
  fs::path path = fs::temp_directory_path() / ("surogate_tokens_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path;
}

TEST(TokenBatches, ShiftsLabelsOncePerSequence) {
  fs::path path = write_file("shift.jsonl", "{\"input_ids\": [5, 6, 7]}\n\n"
                                            "{\"input_ids\": [8, 9, 10, 11], \"labels\": [-100, -100, 10, 11]}\n");
  std::vector<TokenSequence> sequences = read_token_jsonl(path, 16);
  ASSERT_EQ(sequences.size(), 2u);
  std::vector<TokenBatch> batches = pack_token_batches(sequences, 1, 8, path.string());
  ASSERT_EQ(batches.size(), 1u);  // 3 + 4 tokens fit one row of 8
  const TokenBatch& batch = batches[0];
  EXPECT_EQ(batch.input_ids, (std::vector<int32_t>{5, 6, 7, 8, 9, 10, 11, 0}));
  EXPECT_EQ(batch.position_ids, (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 3, 0}));
  EXPECT_EQ(batch.document_ids, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 2}));
  EXPECT_EQ(batch.targets, (std::vector<int32_t>{6, 7, -100, -100, 10, 11, -100, -100}));
  EXPECT_EQ(batch.scored_tokens(), 4);
  fs::remove(path);
}

TEST(TokenBatches, FirstFitPackingAndBatchPadding) {
  std::vector<TokenSequence> sequences;
  for (int length : {5, 4, 3, 2}) {
    TokenSequence sequence;
    sequence.input_ids.assign(static_cast<size_t>(length), 1);
    sequence.labels = sequence.input_ids;
    sequences.push_back(sequence);
  }
  // T = 6: rows {5}, {4, 2}, {3}: the 2 fills the second row's gap.
  std::vector<TokenBatch> batches = pack_token_batches(sequences, 2, 6, "test");
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].document_ids, (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(batches[0].position_ids, (std::vector<int32_t>{0, 1, 2, 3, 4, 0, 0, 1, 2, 3, 0, 1}));
  int64_t scored = 0;
  for (const TokenBatch& batch : batches) scored += batch.scored_tokens();
  EXPECT_EQ(scored, 4 + 3 + 2 + 1);  // every sequence predicts all but its first token
  // The last batch's second row is empty padding.
  for (int t = 6; t < 12; ++t) EXPECT_EQ(batches[1].targets[t], -100);
}

TEST(TokenBatches, BadInputIsAUserErrorNamingTheLine) {
  fs::path text = write_file("text.jsonl", "{\"input_ids\": [1]}\n{\"text\": \"hello\"}\n");
  std::string message = error_of([&] { read_token_jsonl(text, 16); });
  EXPECT_NE(message.find("text.jsonl:2"), std::string::npos) << message;
  EXPECT_NE(message.find("no \"input_ids\""), std::string::npos) << message;

  fs::path range = write_file("range.jsonl", "{\"input_ids\": [1, 16]}\n");
  message = error_of([&] { read_token_jsonl(range, 16); });
  EXPECT_NE(message.find("range.jsonl:1: \"input_ids\"[1] = 16 is outside"), std::string::npos) << message;

  fs::path lengths = write_file("lengths.jsonl", "{\"input_ids\": [1, 2], \"labels\": [1]}\n");
  message = error_of([&] { read_token_jsonl(lengths, 16); });
  EXPECT_NE(message.find("\"labels\" has 1 entries"), std::string::npos) << message;

  fs::path broken = write_file("broken.jsonl", "{\"input_ids\": [1, 2\n");
  message = error_of([&] { read_token_jsonl(broken, 16); });
  EXPECT_NE(message.find("broken.jsonl:1: not a JSON object"), std::string::npos) << message;

  TokenSequence long_sequence{std::vector<int32_t>(9, 1), std::vector<int32_t>(9, 1)};
  message = error_of([&] { pack_token_batches({long_sequence}, 1, 8, "data.jsonl"); });
  EXPECT_NE(message.find("raise --seq-len"), std::string::npos) << message;
  for (const fs::path& path : {text, range, lengths, broken}) fs::remove(path);
}

TEST(TokenBatches, RowsWithoutIdsGoThroughTheRowTokenizer) {
  fs::path path = write_file("mixed.jsonl", "{\"input_ids\": [1, 2]}\n{\"text\": \"abc\"}\n");
  std::vector<int64_t> lines;
  RowTokenizer tokenize = [&](const nlohmann::json& row, const fs::path& file, int64_t line) {
    EXPECT_EQ(file, path);
    lines.push_back(line);
    const std::string text = row.at("text").get<std::string>();
    TokenSequence sequence;
    for (char c : text) sequence.input_ids.push_back(c - 'a' + 1);
    sequence.labels = sequence.input_ids;
    sequence.labels[0] = -100;
    return sequence;
  };
  std::vector<TokenSequence> sequences = read_token_jsonl(path, 16, tokenize);
  ASSERT_EQ(sequences.size(), 2u);
  EXPECT_EQ(lines, (std::vector<int64_t>{2}));
  EXPECT_EQ(sequences[1].input_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(sequences[1].labels, (std::vector<int32_t>{-100, 2, 3}));

  // Ids the tokenizer produces are checked against the model's vocabulary too.
  const std::string message = error_of([&] { read_token_jsonl(path, 3, tokenize); });
  EXPECT_NE(message.find("mixed.jsonl:2: \"input_ids (as tokenized)\"[2] = 3 is outside"), std::string::npos)
      << message;
  fs::remove(path);
}

}  // namespace
}  // namespace surogate::models
