// UTF-8 replacement must count U+FFFD the way Python's decode(errors="replace") does, and the
// GPT-2 byte alphabet must be a bijection on bytes.
#include <gtest/gtest.h>

#include "tokenizer/byte_alphabet.h"
#include "tokenizer/utf8.h"

namespace surogate::tokenizer {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, ValidTextIsUnchanged) {
  const std::string text = "abc \xE4\xB8\xAD \xF0\x9F\x98\x80";
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_EQ(replace_invalid_utf8(text), text);
}

TEST(Utf8, MaximalSubpartsBecomeOneReplacementEach) {
  EXPECT_EQ(replace_invalid_utf8("a\xFF"
                                 "b"),
            "a" + kFffd + "b");
  EXPECT_EQ(replace_invalid_utf8("\xE2\x82"
                                 "a"),
            kFffd + "a");                                                  // truncated 3-byte: one
  EXPECT_EQ(replace_invalid_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate: three
  EXPECT_EQ(replace_invalid_utf8("\xC0\xAF"), kFffd + kFffd);              // overlong lead: two
  EXPECT_EQ(replace_invalid_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);
  EXPECT_EQ(replace_invalid_utf8("\xF0\x9F\x98"), kFffd);  // truncated at end: one
  EXPECT_FALSE(is_valid_utf8("\x80"));
}

TEST(ByteAlphabet, SpaceAndNewlineHaveTheirGpt2Spelling) {
  EXPECT_EQ(byte_to_alphabet(' '), U'\u0120');   // Ġ
  EXPECT_EQ(byte_to_alphabet('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(byte_to_alphabet('a'), U'a');
  EXPECT_EQ(byte_to_alphabet(0xAD), U'\u0143');  // soft hyphen is not printable: remapped
}

TEST(ByteAlphabet, EveryByteRoundTrips) {
  std::string all;
  for (int byte = 0; byte < 256; ++byte) all.push_back(static_cast<char>(byte));
  const std::string spelled = bytes_to_alphabet(all);
  ASSERT_TRUE(is_valid_utf8(spelled));
  EXPECT_EQ(alphabet_to_bytes(spelled), all);
  EXPECT_EQ(alphabet_to_bytes("\xE4\xB8\xAD"), std::nullopt);  // U+4E2D is not in the alphabet
}

}  // namespace
}  // namespace surogate::tokenizer
