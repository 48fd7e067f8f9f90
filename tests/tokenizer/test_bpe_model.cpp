// BPE merging order, the two merge spellings, byte fallback, unk fusing and ignore_merges.
#include <gtest/gtest.h>

#include "fixtures.h"

namespace surogate::tokenizer {
namespace {

using testing::make;

TEST(BpeModel, MergesLowestRankFirst) {
  const Tokenizer tokenizer = make(testing::byte_level_tokenizer());
  EXPECT_EQ(tokenizer.encode("abc", false), (std::vector<int32_t>{5}));  // a b -> ab, ab c -> abc
  EXPECT_EQ(tokenizer.encode("cab", false), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(tokenizer.encode("ba", false), (std::vector<int32_t>{1, 0}));
  // The GPT-2 regex keeps the space with the word: " a" -> Ġa.
  EXPECT_EQ(tokenizer.encode("ab a", false), (std::vector<int32_t>{4, 6}));
}

TEST(BpeModel, TiesGoToTheLeftmostPair) {
  nlohmann::json document = testing::byte_level_tokenizer();
  document["model"]["vocab"]["aa"] = 8;
  document["model"]["merges"] = {"a a"};
  const Tokenizer tokenizer = make(document);
  EXPECT_EQ(tokenizer.encode("aaa", false), (std::vector<int32_t>{8, 0}));
}

TEST(BpeModel, ArrayAndStringMergesAgree) {
  nlohmann::json document = testing::byte_level_tokenizer();
  const Tokenizer strings = make(document);
  document["model"]["merges"] = nlohmann::json::array(
      {nlohmann::json::array({"a", "b"}), nlohmann::json::array({"ab", "c"}),
       nlohmann::json::array({"Ġ", "a"})});
  const Tokenizer arrays = make(document);
  for (const char* text : {"abc", "abcabc ab", "c a b"})
    EXPECT_EQ(strings.encode(text, false), arrays.encode(text, false));
}

TEST(BpeModel, LongWordsUseTheSameMergeOrder) {
  // Longer than the short-word path: the heap path must give the same answer.
  const Tokenizer tokenizer = make(testing::byte_level_tokenizer());
  std::string word;
  std::vector<int32_t> expected;
  for (int i = 0; i < 100; ++i) {
    word += "abc";
    expected.push_back(5);
  }
  EXPECT_EQ(tokenizer.encode(word, false), expected);
}

TEST(BpeModel, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  nlohmann::json document = testing::byte_level_tokenizer();
  document["model"]["vocab"]["ca"] = 8;
  document["model"]["merges"].push_back("c a");
  document["model"]["vocab"]["bca"] = 9;  // reachable only as a whole word
  EXPECT_EQ(make(document).encode("bca", false), (std::vector<int32_t>{1, 8}));
  document["model"]["ignore_merges"] = true;
  EXPECT_EQ(make(document).encode("bca", false), (std::vector<int32_t>{9}));
}

TEST(BpeModel, ByteFallbackSpellsUnknownCharactersAsBytes) {
  const Tokenizer tokenizer = make(testing::sentencepiece_tokenizer());
  // "é" is not in the vocabulary: its two UTF-8 bytes 0xC3 0xA9 become <0xC3> <0xA9>.
  EXPECT_EQ(tokenizer.encode("hié", false), (std::vector<int32_t>{7, 8 + 0xC3, 8 + 0xA9}));
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{7, 8 + 0xC3, 8 + 0xA9}, false), "hié");
}

TEST(BpeModel, UnknownCharactersFuseIntoOneUnk) {
  nlohmann::json document = testing::sentencepiece_tokenizer();
  document["model"]["byte_fallback"] = false;
  EXPECT_EQ(make(document).encode("hi\xC3\xA9\xC3\xA9", false), (std::vector<int32_t>{7, 0}));
  document["model"]["fuse_unk"] = false;
  EXPECT_EQ(make(document).encode("hi\xC3\xA9\xC3\xA9", false), (std::vector<int32_t>{7, 0, 0}));
}

TEST(BpeModel, TemplateAddsBosOnlyWhenAsked) {
  const Tokenizer tokenizer = make(testing::sentencepiece_tokenizer());
  EXPECT_EQ(tokenizer.encode("hi", true), (std::vector<int32_t>{1, 7}));
  EXPECT_EQ(tokenizer.encode("hi", false), (std::vector<int32_t>{7}));
  EXPECT_EQ(tokenizer.encode("", true), (std::vector<int32_t>{1}));
}

}  // namespace
}  // namespace surogate::tokenizer
