// Added tokens are cut out before the model and honour single_word / lstrip / rstrip /
// normalized / special like HF.
#include <gtest/gtest.h>

#include "fixtures.h"

namespace surogate::tokenizer {
namespace {

using testing::make;

nlohmann::json with_added(nlohmann::json added) {
  nlohmann::json document = testing::byte_level_tokenizer();
  document["added_tokens"] = std::move(added);
  return document;
}

nlohmann::json added_token(int id, const std::string& content, bool lstrip = false,
                           bool rstrip = false, bool single_word = false, bool special = true,
                           bool normalized = false) {
  return {{"id", id},          {"content", content}, {"single_word", single_word},
          {"lstrip", lstrip},  {"rstrip", rstrip},   {"normalized", normalized},
          {"special", special}};
}

TEST(AddedTokens, AreNeverSplit) {
  nlohmann::json document = with_added({added_token(10, "<x>")});
  document["model"]["vocab"]["<"] = 20;
  document["model"]["vocab"]["x"] = 21;
  const Tokenizer tokenizer = make(document);
  EXPECT_EQ(tokenizer.encode("ab<x>c", false), (std::vector<int32_t>{4, 10, 2}));
  EXPECT_EQ(tokenizer.encode("<x><x>", false), (std::vector<int32_t>{10, 10}));
  EXPECT_EQ(tokenizer.encode("<x", false), (std::vector<int32_t>{20, 21}));  // a look-alike is text
}

TEST(AddedTokens, LongestMatchWins) {
  const Tokenizer tokenizer = make(with_added({added_token(10, "<x>"), added_token(11, "<x>>")}));
  EXPECT_EQ(tokenizer.encode("<x>>a", false), (std::vector<int32_t>{11, 0}));
}

TEST(AddedTokens, LstripAndRstripSwallowSpaces) {
  const Tokenizer plain = make(with_added({added_token(10, "<x>")}));
  const Tokenizer stripping = make(with_added({added_token(10, "<x>", true, true)}));
  // Without stripping the spaces stay text: "a", " " then "<x>", then " " and "b".
  EXPECT_EQ(plain.encode("a <x> b", false), (std::vector<int32_t>{0, 3, 10, 3, 1}));
  EXPECT_EQ(stripping.encode("a <x> b", false), (std::vector<int32_t>{0, 10, 1}));
  EXPECT_EQ(stripping.encode("a \t <x>\n b", false), (std::vector<int32_t>{0, 10, 1}));
}

TEST(AddedTokens, SingleWordRejectsMatchesInsideWords) {
  const Tokenizer tokenizer = make(with_added({added_token(10, "ba", false, false, true)}));
  EXPECT_EQ(tokenizer.encode("ba", false), (std::vector<int32_t>{10}));
  EXPECT_EQ(tokenizer.encode("c ba", false), (std::vector<int32_t>{2, 3, 10}));
  EXPECT_EQ(tokenizer.encode("bac", false), (std::vector<int32_t>{1, 0, 2}));  // glued to "c": BPE
}

TEST(AddedTokens, SpecialTokensCanBeSkippedWhenDecoding) {
  const Tokenizer tokenizer = make(
      with_added({added_token(10, "<x>"), added_token(11, "<y>", false, false, false, false)}));
  const std::vector<int32_t> ids = {10, 0, 11, 1};
  EXPECT_EQ(tokenizer.decode(ids, false), "<x>a<y>b");
  EXPECT_EQ(tokenizer.decode(ids, true), "a<y>b");
  EXPECT_TRUE(tokenizer.is_special_token(10));
  EXPECT_FALSE(tokenizer.is_special_token(11));
  EXPECT_EQ(tokenizer.token_to_id("<y>"), 11);
  EXPECT_EQ(tokenizer.id_to_token(10), "<x>");
  EXPECT_EQ(tokenizer.vocab_size(), 12u);
}

TEST(AddedTokens, NormalizedTokensMatchTheNormalizedText) {
  nlohmann::json document = testing::sentencepiece_tokenizer();
  document["added_tokens"].push_back(added_token(302, "hx", false, false, false, false, true));
  document["model"]["vocab"]["x"] = 301;
  const Tokenizer tokenizer = make(document);
  // The token's pattern is its normalized content "▁hx"; "a hx" normalizes to "▁a▁hx".
  EXPECT_EQ(tokenizer.encode("a hx", false), (std::vector<int32_t>{3, 8 + 'a', 302}));
  EXPECT_EQ(tokenizer.encode("ahx", false), (std::vector<int32_t>{3, 8 + 'a', 4, 301}));
}

TEST(AddedTokens, ContentAlreadyInTheModelTakesTheModelId) {
  nlohmann::json document = testing::sentencepiece_tokenizer();
  document["added_tokens"].push_back(added_token(300, "▁hi", false, false, false, false, true));
  const Tokenizer tokenizer = make(document);
  EXPECT_EQ(tokenizer.token_to_id("▁hi"), 7);
  EXPECT_EQ(tokenizer.encode(" hi", false), (std::vector<int32_t>{7}));  // HF gives [7] too
}

}  // namespace
}  // namespace surogate::tokenizer
