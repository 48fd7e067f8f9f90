// Replays the corpus of fuzz_training_config (fuzz/corpus/training_config/) through
// load_config_from_string as the fuzz target does: every file loads (and prints) or fails with a
// UserError naming the file; bad-* files (minimised fuzzer findings) must fail that way.
#include <gtest/gtest.h>

#include "config/config_loader.h"
#include "fuzz_corpus.h"

namespace surogate {
namespace {

TEST(TrainingConfigCorpus, EveryFileLoadsOrFailsCleanly) {
  auto counts = testing::replay_fuzz_corpus("training_config", "corpus.yaml", [](const std::string& bytes) {
    dump_config_yaml(load_config_from_string(bytes, "corpus.yaml"));
  });
  EXPECT_GE(counts.files, 10u);
}

}  // namespace
}  // namespace surogate
