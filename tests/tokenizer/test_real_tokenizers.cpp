// The three real tokenizers (tests/fixtures/tokenizers, unpacked into the build tree) load, give
// HF's ids for a few fixed texts (values taken from HF `tokenizers`), expose their config, and
// encode_batch equals encode.
#include <gtest/gtest.h>

#include <filesystem>

#include "tokenizer/tokenizer.h"

namespace surogate::tokenizer {
namespace {

std::filesystem::path folder(const char* name) {
  const std::filesystem::path path = std::filesystem::path(SUROGATE_TOKENIZERS_DIR) / name;
  if (!std::filesystem::exists(path / "tokenizer.json"))
    ADD_FAILURE() << "missing unpacked tokenizer (build the surogate_test_tokenizers target): " << path;
  return path;
}

TEST(RealTokenizers, Qwen3) {
  const Tokenizer tokenizer = Tokenizer::load(folder("qwen3"));
  EXPECT_EQ(tokenizer.encode("Hello world", false), (std::vector<int32_t>{9707, 1879}));
  EXPECT_EQ(tokenizer.encode("<|im_start|>user", true), (std::vector<int32_t>{151644, 872}));
  EXPECT_EQ(tokenizer.eos_token(), "<|im_end|>");
  EXPECT_EQ(tokenizer.eos_token_id(), 151645);
  EXPECT_EQ(tokenizer.pad_token_id(), 151643);
  EXPECT_EQ(tokenizer.bos_token_id(), std::nullopt);
  EXPECT_EQ(tokenizer.vocab_size(), 151669u);
  EXPECT_TRUE(tokenizer.chat_template().has_value());
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("多语言 text ✓", false), false), "多语言 text ✓");
}

TEST(RealTokenizers, Llama3) {
  const Tokenizer tokenizer = Tokenizer::load(folder("llama3"));
  EXPECT_EQ(tokenizer.encode("Hello world", false), (std::vector<int32_t>{9906, 1917}));
  EXPECT_EQ(tokenizer.bos_token_id(), 128000);
  EXPECT_EQ(tokenizer.eos_token_id(), 128001);
  EXPECT_EQ(tokenizer.config().value("tokenizer_class", ""), "PreTrainedTokenizerFast");
}

TEST(RealTokenizers, Llama2) {
  const Tokenizer tokenizer = Tokenizer::load(folder("llama2"));
  EXPECT_EQ(tokenizer.encode("Hello world", true), (std::vector<int32_t>{1, 22557, 1526}));
  EXPECT_EQ(tokenizer.encode("a</s>b", true), (std::vector<int32_t>{1, 264, 2, 287}));
  EXPECT_EQ(tokenizer.encode("", true), (std::vector<int32_t>{1}));
  EXPECT_EQ(tokenizer.bos_token_id(), 1);
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{1, 22557, 1526}, true), "Hello world");
}

TEST(RealTokenizers, BatchEqualsSingle) {
  const Tokenizer tokenizer = Tokenizer::load(folder("qwen3"));
  std::vector<std::string> texts;
  for (int i = 0; i < 3000; ++i)
    texts.push_back("line " + std::to_string(i * 7919) + " 中文 " + std::string(i % 50, 'x'));
  const auto batch = tokenizer.encode_batch(texts, true);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i)
    EXPECT_EQ(batch[i], tokenizer.encode(texts[i], true)) << i;
}

}  // namespace
}  // namespace surogate::tokenizer
