// Malformed or unsupported tokenizer files give one UserError naming the file and the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "fixtures.h"

namespace surogate::tokenizer {
namespace {

using testing::make;

// The UserError message of `action`, or a failure when it does not throw one.
template <typename Action>
std::string user_error(Action action) {
  try {
    action();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError";
  return {};
}

TEST(Errors, UnsupportedComponentsAreNamed) {
  nlohmann::json document = testing::byte_level_tokenizer();
  document["normalizer"] = {{"type", "Lowercase"}};
  std::string message = user_error([&] { make(document); });
  EXPECT_NE(message.find("test tokenizer.json"), std::string::npos) << message;
  EXPECT_NE(message.find("normalizer.type"), std::string::npos) << message;
  EXPECT_NE(message.find("Lowercase"), std::string::npos) << message;

  document = testing::byte_level_tokenizer();
  document["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Whitespace"}}}}};
  message = user_error([&] { make(document); });
  EXPECT_NE(message.find("pre_tokenizer.pretokenizers[0].type"), std::string::npos) << message;

  document = testing::byte_level_tokenizer();
  document["model"]["type"] = "Unigram";
  EXPECT_NE(user_error([&] { make(document); }).find("Unigram"), std::string::npos);

  document = testing::byte_level_tokenizer();
  document["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(user_error([&] { make(document); }).find("decoder.type"), std::string::npos);
}

TEST(Errors, BrokenModelsAreNamed) {
  nlohmann::json document = testing::byte_level_tokenizer();
  document["model"]["merges"] = {"a z"};
  std::string message = user_error([&] { make(document); });
  EXPECT_NE(message.find("model.merges[0]"), std::string::npos) << message;

  document = testing::byte_level_tokenizer();
  document["model"]["merges"] = {"ab"};
  EXPECT_NE(user_error([&] { make(document); }).find("model.merges[0]"), std::string::npos);

  document = testing::byte_level_tokenizer();
  document["model"].erase("vocab");
  EXPECT_NE(user_error([&] { make(document); }).find("model.vocab"), std::string::npos);

  document = testing::byte_level_tokenizer();
  document["model"]["unk_token"] = "<missing>";
  EXPECT_NE(user_error([&] { make(document); }).find("model.unk_token"), std::string::npos);

  document = testing::byte_level_tokenizer();
  document["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_NE(user_error([&] { make(document); }).find("pre_tokenizer.pattern.Regex"),
            std::string::npos);

  document = testing::byte_level_tokenizer();
  document["added_tokens"] = {{{"content", "<x>"}}};
  EXPECT_NE(user_error([&] { make(document); }).find("added_tokens[0].id"), std::string::npos);
}

// The ids a post-processor adds reach the model as they are: an id outside the tokenizer's own
// vocabulary (or one that does not fit int32 and would wrap around) is a broken file.
TEST(Errors, PostProcessorIdsMustBeTokensOfTheVocabulary) {
  const nlohmann::json good = testing::sentencepiece_tokenizer();
  EXPECT_EQ(make(good).encode("hi", true).front(), 1);
  for (const nlohmann::json bad_id : {nlohmann::json(-7), nlohmann::json(5000), nlohmann::json(int64_t{1} << 40)}) {
    nlohmann::json document = good;
    document["post_processor"]["special_tokens"]["<s>"]["ids"] = {bad_id};
    std::string message = user_error([&] { make(document); });
    EXPECT_NE(message.find("test tokenizer.json: key 'post_processor.special_tokens.<s>.ids'"), std::string::npos)
        << message;
    EXPECT_NE(message.find(bad_id.dump()), std::string::npos) << message;
  }
  nlohmann::json document = good;
  document["post_processor"] = {{"type", "BertProcessing"}, {"cls", {"<s>", 1}}, {"sep", {"</s>", 900}}};
  std::string message = user_error([&] { make(document); });
  EXPECT_NE(message.find("post_processor.sep"), std::string::npos) << message;
  EXPECT_NE(message.find("900"), std::string::npos) << message;
}

TEST(Errors, MissingAndMalformedFiles) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "surogate_tokenizer_errors";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string message = user_error([&] { Tokenizer::load(dir); });
  EXPECT_NE(message.find("tokenizer.json"), std::string::npos) << message;

  std::ofstream(dir / "tokenizer.json") << "{\"model\": ";
  message = user_error([&] { Tokenizer::load(dir); });
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;

  std::ofstream(dir / "tokenizer.json") << testing::byte_level_tokenizer().dump();
  std::ofstream(dir / "tokenizer_config.json") << R"({"bos_token": 5})";
  message = user_error([&] { Tokenizer::load(dir); });
  EXPECT_NE(message.find("tokenizer_config.json: key 'bos_token'"), std::string::npos) << message;

  std::ofstream(dir / "tokenizer_config.json")
      << R"({"bos_token": {"content": "a"}, "eos_token": "b"})";
  const Tokenizer tokenizer = Tokenizer::load(dir);
  EXPECT_EQ(tokenizer.bos_token(), "a");
  EXPECT_EQ(tokenizer.bos_token_id(), 0);
  EXPECT_EQ(tokenizer.eos_token_id(), 1);
  EXPECT_EQ(tokenizer.pad_token_id(), std::nullopt);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace surogate::tokenizer
