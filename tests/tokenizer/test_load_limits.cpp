// The rules that fuzz_tokenizer_json's review and runs added to loading a tokenizer.json (their
// reproducers are the bad-* files of fuzz/corpus/tokenizer_json/, replayed by
// test_tokenizer_json_corpus.cpp): each file is rejected at load with a UserError naming the file
// and the key, where it used to escape as another exception, allocate gigabytes, split text inside
// a character, or grow a text exponentially.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "fixtures.h"
#include "tokenizer/text_growth.h"
#include "user_error_of.h"

namespace surogate::tokenizer {
namespace {

using testing::make;

nlohmann::json replace_step(const std::string& content) {
  return {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", content}};
}

// A number beyond double is nlohmann's out_of_range, not its parse_error: it escaped load().
TEST(LoadLimits, NumberTooLargeForJsonIsNotValidJson) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "surogate_tokenizer_load_limits";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << R"({"model": {"vocab": {"a": 0}, "merges": [], "dropout": 1e999}})";
  const std::string message = error_of([&] { Tokenizer::load(dir); });
  EXPECT_NE(message.find((dir / "tokenizer.json").string() + ": not valid JSON"), std::string::npos) << message;
  EXPECT_NE(message.find("1e999"), std::string::npos) << message;
  std::filesystem::remove_all(dir);
  EXPECT_NE(error_of([] { Tokenizer::from_text("[1e999]", "t.json"); }).find("t.json: not valid JSON"), std::string::npos);
}

// One slot per id up to the largest: holes are fine up to 2^20, a stray huge id is an error.
TEST(LoadLimits, VocabularyIdsMayLeaveOnlyBoundedHoles) {
  nlohmann::json document = testing::byte_level_tokenizer();
  document["model"]["vocab"]["Ċ"] = 1000;  // a hole of ~990 ids, as added tokens leave
  EXPECT_EQ(make(document).vocab_size(), 1001u);
  document["model"]["vocab"]["Ċ"] = 2147483646;
  const std::string message = error_of([&] { make(document); });
  EXPECT_NE(message.find("test tokenizer.json: key 'model.vocab': the largest id is 2147483646, but there are only 8"),
            std::string::npos)
      << message;
}

// \C matches one byte, so a piece could end inside a character.
TEST(LoadLimits, BackslashCIsRefused) {
  nlohmann::json document = testing::byte_level_tokenizer();
  document["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\C"}}}, {"behavior", "Isolated"}};
  const std::string message = error_of([&] { make(document); });
  EXPECT_NE(message.find("test tokenizer.json: key 'pre_tokenizer.pattern.Regex'"), std::string::npos) << message;
  EXPECT_NE(message.find("\\C"), std::string::npos) << message;
}

// Every Replace of "a" by "aa" doubles the text: 2^10 is the most accepted, normalizer and
// pre-tokenizer together.
TEST(LoadLimits, NormalizerAndPreTokenizerGrowthIsBounded) {
  nlohmann::json document = testing::byte_level_tokenizer();
  document["pre_tokenizer"]["add_prefix_space"] = true;  // 2
  document["normalizer"] = {{"type", "Sequence"}, {"normalizers", nlohmann::json::array()}};
  for (int i = 0; i < 9; ++i) document["normalizer"]["normalizers"].push_back(replace_step("aa"));
  EXPECT_EQ(make(document).encode("a", false).size(), 512u);  // " " + 512 a: 2 * 2^9 = 1024
  document["normalizer"]["normalizers"].push_back(replace_step("aa"));
  const std::string message = error_of([&] { make(document); });
  EXPECT_NE(message.find("test tokenizer.json: key 'normalizer, pre_tokenizer': these steps can make a text more "
                         "than 1024 times longer (the normalizer up to 1024 times"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("the pre-tokenizer up to 2"), std::string::npos) << message;
}

// A Split making every character a piece, then a Metaspace prefixing each piece, doubles the text
// per round: each Metaspace counts 1 + its replacement's length.
TEST(LoadLimits, MetaspaceStepsCountTowardsGrowth) {
  nlohmann::json document = testing::byte_level_tokenizer();
  nlohmann::json steps = nlohmann::json::array();
  for (int i = 0; i < 10; ++i) {
    steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", "."}}}, {"behavior", "Isolated"}});
    steps.push_back({{"type", "Metaspace"}, {"replacement", i % 2 ? "x" : "y"}, {"prepend_scheme", "always"},
                     {"split", false}});
  }
  document["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", steps}};
  EXPECT_EQ(error_of([&] { make(document); }), "");  // 2^10
  steps.push_back(steps[0]);
  steps.push_back(steps[1]);
  document["pre_tokenizer"]["pretokenizers"] = steps;
  EXPECT_NE(error_of([&] { make(document); }).find("the pre-tokenizer up to more than 1024"), std::string::npos);
}

TEST(LoadLimits, MetaspaceReplacementIsOneCharacter) {
  nlohmann::json document = testing::byte_level_tokenizer();
  document["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", " x"}};
  const std::string message = error_of([&] { make(document); });
  EXPECT_NE(message.find("key 'pre_tokenizer.replacement': expected exactly one character"), std::string::npos)
      << message;
}

TEST(LoadLimits, DecoderReplaceGrowthIsBounded) {
  nlohmann::json document = testing::byte_level_tokenizer();
  document["decoder"] = {{"type", "Sequence"}, {"decoders", nlohmann::json::array()}};
  for (int i = 0; i < 10; ++i) document["decoder"]["decoders"].push_back(replace_step("aa"));
  EXPECT_EQ(make(document).decode(std::vector<int32_t>{0}, false), std::string(1024, 'a'));
  document["decoder"]["decoders"].push_back(replace_step("aa"));
  const std::string message = error_of([&] { make(document); });
  EXPECT_NE(message.find("test tokenizer.json: key 'decoder': these steps can make a text more than 1024 times"),
            std::string::npos)
      << message;
}

// PCRE2's backtracking limit stops a pattern that explodes on a text; the error names the key.
TEST(LoadLimits, RegexThatRunsOutOfBacktrackingNamesItsKey) {
  nlohmann::json document = testing::byte_level_tokenizer();
  document["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {
      {{"type", "Split"}, {"pattern", {{"Regex", "(a|aa)+\\d"}}}, {"behavior", "Isolated"}},
      {{"type", "ByteLevel"}, {"add_prefix_space", false}}}}};
  const Tokenizer tokenizer = make(document);
  EXPECT_EQ(error_of([&] { tokenizer.encode("aa1", false); }), "");
  const std::string message = error_of([&] { tokenizer.encode(std::string(60, 'a'), false); });
  EXPECT_NE(message.find("test tokenizer.json: key 'pre_tokenizer.pretokenizers[0].pattern.Regex': matching the "
                         "regular expression"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace surogate::tokenizer
