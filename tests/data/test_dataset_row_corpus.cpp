// Replays the corpus of fuzz_dataset_row (fuzz/corpus/dataset_row/) through the fuzz target's
// own case (fuzz/dataset_row_case.h: first byte = dataset type and options, rest = one JSONL
// line): every row formats (labels and weights lining up with the tokens, a dropped row saying
// why) or fails with a UserError naming the file (and line); bad-* files (minimised fuzzer
// findings) must fail that way.
#include <gtest/gtest.h>

#include "dataset_row_case.h"
#include "fuzz_corpus.h"

namespace surogate::data {
namespace {

TEST(DatasetRowCorpus, EveryRowFormatsOrFailsCleanly) {
  size_t formatted_rows = 0;
  auto counts = surogate::testing::replay_fuzz_corpus("dataset_row", "fuzz/data.jsonl", [&](const std::string& bytes) {
    auto formatted = fuzz::format_dataset_row_case(bytes);
    if (!formatted) return;
    if (formatted->sample) {
      const TokenizedSample& sample = *formatted->sample;
      EXPECT_EQ(sample.labels.size(), sample.input_ids.size());
      if (!sample.weights.empty()) EXPECT_EQ(sample.weights.size(), sample.input_ids.size());
      ++formatted_rows;
    } else {
      EXPECT_FALSE(formatted->drop_reason.empty());
    }
  });
  EXPECT_GE(counts.files, 30u);
  EXPECT_GE(formatted_rows, 20u);  // the seeds are real rows: most must format
}

}  // namespace
}  // namespace surogate::data
