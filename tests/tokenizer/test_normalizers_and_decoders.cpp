// Normalizers (NFC, Prepend, Replace, Sequence), Split behaviors, Metaspace, and decoders.
#include <gtest/gtest.h>

#include "fixtures.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"

namespace surogate::tokenizer {
namespace {

std::string normalize(const nlohmann::json& component, std::string text) {
  const Normalizer normalizer =
      Normalizer::from_json(component, JsonPath("test.json", "normalizer"));
  std::string scratch;
  RegexScratch regex_scratch;
  normalizer.normalize(text, scratch, regex_scratch);
  return text;
}

std::vector<std::string> pre_tokenize(const nlohmann::json& component, const std::string& text) {
  const PreTokenizer pre_tokenizer =
      PreTokenizer::from_json(component, JsonPath("test.json", "pre_tokenizer"));
  Pieces pieces{text, {{0, static_cast<uint32_t>(text.size())}}};
  PreTokenizerScratch scratch;
  pre_tokenizer.pre_tokenize(pieces, true, scratch);
  std::vector<std::string> words;
  for (const ByteSpan span : pieces.spans)
    words.push_back(pieces.text.substr(span.begin, span.end - span.begin));
  return words;
}

TEST(Normalizers, NfcComposes) {
  EXPECT_EQ(normalize({{"type", "NFC"}}, "e\xCC\x81"), "\xC3\xA9");  // e + combining acute -> é
  EXPECT_EQ(normalize({{"type", "NFC"}}, "plain ascii"), "plain ascii");
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\xEF\xAC\x81"), "fi");  // the ﬁ ligature
}

TEST(Normalizers, PrependAndReplaceInSequence) {
  const nlohmann::json sequence = testing::sentencepiece_tokenizer()["normalizer"];
  EXPECT_EQ(normalize(sequence, "a b"), "▁a▁b");
  EXPECT_EQ(normalize(sequence, ""), "");  // Prepend leaves empty text alone
  const nlohmann::json regex_replace = {
      {"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", "_"}};
  EXPECT_EQ(normalize(regex_replace, "a  \t b\u3000c"), "a_b_c");
}

TEST(PreTokenizers, SplitBehaviors) {
  const auto split = [](const char* behavior, bool invert = false) {
    return nlohmann::json{{"type", "Split"},
                          {"pattern", {{"String", "-"}}},
                          {"behavior", behavior},
                          {"invert", invert}};
  };
  using Words = std::vector<std::string>;
  EXPECT_EQ(pre_tokenize(split("Removed"), "a-b--c"), (Words{"a", "b", "c"}));
  EXPECT_EQ(pre_tokenize(split("Isolated"), "a-b--c"), (Words{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithPrevious"), "a-b--c"), (Words{"a-", "b-", "-", "c"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithNext"), "a-b--c"), (Words{"a", "-b", "-", "-c"}));
  EXPECT_EQ(pre_tokenize(split("Contiguous"), "a-b--c"), (Words{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(pre_tokenize(split("Removed", true), "a-b--c"), (Words{"-", "-", "-"}));
}

TEST(PreTokenizers, RegexSplitUsesUnicodeClasses) {
  const nlohmann::json qwen_split = {
      {"type", "Split"},
      {"pattern",
       {{"Regex",
         R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
      {"behavior", "Isolated"},
      {"invert", false}};
  using Words = std::vector<std::string>;
  EXPECT_EQ(pre_tokenize(qwen_split, "Hello world's 123"),
            (Words{"Hello", " world", "'s", " ", "1", "2", "3"}));
  // U+3000 is White_Space for Oniguruma's \s; U+180E is not.
  EXPECT_EQ(pre_tokenize(qwen_split, "a\u3000\u3000b"), (Words{"a", "\u3000", "\u3000b"}));
}

TEST(PreTokenizers, MetaspaceReplacesAndSplits) {
  const nlohmann::json metaspace = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_EQ(pre_tokenize(metaspace, "hi there"), (std::vector<std::string>{"▁hi", "▁there"}));
}

TEST(Decoders, SentencePieceChainRestoresText) {
  const Tokenizer tokenizer = testing::make(testing::sentencepiece_tokenizer());
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{1, 7, 3, 4}, false), "<s> hi h");
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{1, 7, 3, 4}, true), "hi h");
  // A lone continuation byte is not UTF-8: one U+FFFD per byte.
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{7, 8 + 0xA9, 8 + 0xA9}, false),
            "hi\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{7, 99999, -5}, false),
            "hi");  // unknown ids are skipped
}

TEST(Decoders, ByteLevelMapsBackAndReplacesBrokenUtf8) {
  const Tokenizer tokenizer = testing::make(testing::byte_level_tokenizer());
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{5, 6, 7}, false), "abc a\n");
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("abc a\n", false), false), "abc a\n");
}

TEST(Regex, OnigurumaSpaceClassIsTranslated) {
  EXPECT_EQ(translate_oniguruma_pattern(R"(\s+(?!\S)|[^\s\p{L}])"),
            R"(\p{White_Space}+(?!\P{White_Space})|[^\p{White_Space}\p{L}])");
  EXPECT_EQ(translate_oniguruma_pattern(R"(\\s)"), R"(\\s)");  // an escaped backslash, then "s"
}

}  // namespace
}  // namespace surogate::tokenizer
