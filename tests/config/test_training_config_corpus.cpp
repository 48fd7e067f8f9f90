// Replays the corpus of fuzz_training_config (fuzz/corpus/training_config/) through
// load_config_from_string as the fuzz target does: every file loads (and prints) or fails with a
// UserError naming the file; bad-* files (minimised fuzzer findings) must fail that way.
// Replaying the seeds found that a field missing from a dataset entry was reported as
// "the default: option ..." without the file; it is now reported at the entry's line.
#include <gtest/gtest.h>

#include "config/config_loader.h"
#include "fuzz_corpus.h"
#include "user_error_of.h"

namespace surogate {
namespace {

TEST(TrainingConfigCorpus, EveryFileLoadsOrFailsCleanly) {
  auto counts = testing::replay_fuzz_corpus("training_config", "corpus.yaml", [](const std::string& bytes) {
    dump_config_yaml(load_config_from_string(bytes, "corpus.yaml"));
  });
  EXPECT_GE(counts.files, 10u);
}

TEST(TrainingConfigCorpus, FieldMissingFromAnEntryIsReportedAtTheEntrysLine) {
  std::string message = error_of([] {
    load_config_from_string("model: m\ndatasets:\n  - path: a\n    type: text\n  - path: d\n    type: instruction\n"
                            "    output_field: o\n",
                            "config.yaml");
  });
  EXPECT_EQ(message.rfind("config.yaml:5: option 'datasets[1].instruction_field' is required for type: instruction", 0), 0u)
      << message;
}

}  // namespace
}  // namespace surogate
