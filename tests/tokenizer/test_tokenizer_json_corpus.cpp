// Replays the corpus of fuzz_tokenizer_json (fuzz/corpus/tokenizer_json/) through the fuzz
// target's own case (fuzz/tokenizer_json_case.h): every file loads, encodes the fixed text and
// decodes it within the tokenizer's contract, or fails with a UserError naming the file; bad-*
// files (hand-written rejections and minimised fuzzer findings) must fail that way.
#include <gtest/gtest.h>

#include "fuzz_corpus.h"
#include "tokenizer_json_case.h"

namespace surogate::tokenizer {
namespace {

TEST(TokenizerJsonCorpus, EveryFileLoadsOrFailsCleanly) {
  size_t loaded = 0;
  auto counts = surogate::testing::replay_fuzz_corpus("tokenizer_json", "corpus/tokenizer.json", [&](const std::string& bytes) {
    EXPECT_EQ(fuzz::run_tokenizer_json_case(bytes, "corpus/tokenizer.json"), "");
    ++loaded;
  });
  EXPECT_GE(counts.files, 10u);
  EXPECT_GE(counts.bad, 5u);
  // The seed-* files are valid tokenizers: the replay must exercise encode / decode, not only errors.
  EXPECT_GE(loaded, counts.files - counts.bad);
}

}  // namespace
}  // namespace surogate::tokenizer
