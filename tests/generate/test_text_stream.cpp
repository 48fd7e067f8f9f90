// text_stream.h on the real tokenizers (tests/fixtures/tokenizers: Qwen3 and Llama 3 byte-level
// BPE, Llama 2 SentencePiece BPE with byte fallback and a leading-space Strip): the pieces pushed
// out are valid UTF-8 and add up to exactly decode(all ids), also for random ids; stop strings
// are never shown, even in part.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "generate/text_stream.h"
#include "tokenizer/utf8.h"
#include "user_error_of.h"

namespace surogate::generate {
namespace {

const tokenizer::Tokenizer& real_tokenizer(const std::string& name) {
  static std::map<std::string, tokenizer::Tokenizer> loaded;
  auto found = loaded.find(name);
  if (found == loaded.end()) {
    const std::filesystem::path folder = std::filesystem::path(SUROGATE_TOKENIZERS_DIR) / name;
    found = loaded.emplace(name, tokenizer::Tokenizer::load(folder)).first;
  }
  return found->second;
}

struct Streamed {
  std::vector<std::string> pieces;  // what each push returned, then flush
  std::string all;
  bool stopped = false;
};

Streamed stream_ids(const tokenizer::Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                    const std::vector<std::string>& stops = {}, bool skip_special_tokens = true) {
  TextStream stream(tokenizer, stops, skip_special_tokens);
  Streamed result;
  for (int32_t id : ids) {
    result.pieces.push_back(stream.push(id));
    if (stream.stopped()) break;
  }
  result.pieces.push_back(stream.flush());
  for (const std::string& piece : result.pieces) result.all += piece;
  result.stopped = stream.stopped();
  EXPECT_EQ(result.all, stream.text());
  return result;
}

const std::vector<std::string> kTexts = {
    "Hello world",
    " leading space and  two  spaces\n\nand new lines\t tabs",
    "多语言 text ✓ 漢字かなカナ 한국어",
    "emoji 😀🎉 family 👨‍👩‍👧 flag 🇫🇷 skin 👍🏽 end",
    "Ünïcödé àccents — “quotes” …",
};

class EachTokenizer : public testing::TestWithParam<std::string> {};

TEST_P(EachTokenizer, PiecesAreValidUtf8AndAddUpToTheDecode) {
  const tokenizer::Tokenizer& tokenizer = real_tokenizer(GetParam());
  for (const std::string& text : kTexts) {
    const std::vector<int32_t> ids = tokenizer.encode(text, true);
    for (bool skip : {true, false}) {
      const Streamed streamed = stream_ids(tokenizer, ids, {}, skip);
      EXPECT_EQ(streamed.all, tokenizer.decode(ids, skip)) << text;
      for (const std::string& piece : streamed.pieces) {
        EXPECT_TRUE(tokenizer::is_valid_utf8(piece)) << text;
        EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos)
            << "a split character shown: " << text;
      }
    }
  }
}

TEST_P(EachTokenizer, ACharacterSplitOverTokensWaitsForItsLastByte) {
  const tokenizer::Tokenizer& tokenizer = real_tokenizer(GetParam());
  // A rare emoji is several byte tokens in each of these vocabularies.
  const std::vector<int32_t> ids = tokenizer.encode("a🦩", false);
  ASSERT_GT(ids.size(), 2u) << "the emoji is one token: the test needs a split character";
  TextStream stream(tokenizer);
  EXPECT_EQ(stream.push(ids[0]), "a");
  for (size_t i = 1; i + 1 < ids.size(); ++i) EXPECT_EQ(stream.push(ids[i]), "") << i;
  const std::string last = stream.push(ids.back());
  // Byte-level BPE shows the character with its last byte; byte-fallback tokens wait for a token
  // that ends their run (a further byte could make the run invalid: decode then gives U+FFFDs).
  EXPECT_EQ(last, GetParam() == "llama2" ? "" : "🦩");
  EXPECT_EQ(last + stream.flush(), "🦩");
}

TEST_P(EachTokenizer, AnIncompleteTailIsFlushedAsDecodeRendersIt) {
  const tokenizer::Tokenizer& tokenizer = real_tokenizer(GetParam());
  std::vector<int32_t> ids = tokenizer.encode("ok🦩", false);
  ids.pop_back();
  const Streamed streamed = stream_ids(tokenizer, ids);
  EXPECT_EQ(streamed.all, tokenizer.decode(ids, true));
  EXPECT_TRUE(streamed.all.ends_with("\xEF\xBF\xBD"));
  EXPECT_TRUE(streamed.pieces.back().ends_with("\xEF\xBF\xBD"));  // only flush shows it
}

TEST_P(EachTokenizer, RandomIdsAddUpToTheDecode) {
  const tokenizer::Tokenizer& tokenizer = real_tokenizer(GetParam());
  std::mt19937_64 engine(46);
  const auto vocab = static_cast<int64_t>(tokenizer.vocab_size());
  for (int sequence = 0; sequence < 200; ++sequence) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 24; ++i) {
      const uint64_t draw = engine();
      // Half the ids from the first 512 (bytes, byte-fallback tokens, specials), half anywhere.
      ids.push_back(static_cast<int32_t>(draw % 2 ? (draw >> 1) % 512
                                                  : (draw >> 1) % static_cast<uint64_t>(vocab)));
    }
    for (bool skip : {true, false}) {
      const Streamed streamed = stream_ids(tokenizer, ids, {}, skip);
      ASSERT_EQ(streamed.all, tokenizer.decode(ids, skip)) << "sequence " << sequence;
      for (const std::string& piece : streamed.pieces) ASSERT_TRUE(tokenizer::is_valid_utf8(piece));
    }
  }
}

TEST_P(EachTokenizer, StopStringsAreNeverShownEvenInPart) {
  const tokenizer::Tokenizer& tokenizer = real_tokenizer(GetParam());
  struct Case {
    std::string text, stop, shown;
    bool stopped;
  };
  const std::vector<Case> cases = {
      {"Hello world. STOP here", "STOP", "Hello world. ", true},
      {"Hello world, again", "lo wor", "Hel", true},  // spans two tokens
      {"Hello world", "ell", "H", true},              // inside one token, text after it
      {"Hello world. And more", "world!", "Hello world. And more", false},  // held, then released
      {"Hello wor", "world", "Hello wor", false},  // held to the end: flush shows it
      {"数据 😀 结束", "😀", "数据 ", true},
  };
  for (const Case& c : cases) {
    const std::vector<int32_t> ids = tokenizer.encode(c.text, false);
    const Streamed streamed = stream_ids(tokenizer, ids, {"unrelated", c.stop});
    EXPECT_EQ(streamed.all, c.shown) << c.text;
    EXPECT_EQ(streamed.stopped, c.stopped) << c.text;
    // Before the flush, what was shown is never more than the text before the stop string.
    std::string before_flush;
    for (size_t i = 0; i + 1 < streamed.pieces.size(); ++i) before_flush += streamed.pieces[i];
    const size_t stop_at = c.text.find(c.stop);
    EXPECT_TRUE(c.text.substr(0, stop_at == std::string::npos ? c.text.size() : stop_at)
                    .starts_with(before_flush))
        << c.text;
    if (c.text == "Hello wor") EXPECT_EQ(streamed.pieces.back(), "wor");
  }
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, EachTokenizer,
                         testing::Values("qwen3", "llama3", "llama2"));

TEST(TextStream, TheEarliestStopStringWins) {
  const tokenizer::Tokenizer& tokenizer = real_tokenizer("qwen3");
  const std::vector<int32_t> ids = tokenizer.encode("one two three four", false);
  EXPECT_EQ(stream_ids(tokenizer, ids, {"four", "two"}).all, "one ");
}

TEST(TextStream, AnEmptyStopStringIsAUserError) {
  EXPECT_EQ(error_of([] {
              TextStream(real_tokenizer("qwen3"), {"x", ""});
            }),
            "a stop string must not be empty");
}

}  // namespace
}  // namespace surogate::generate
