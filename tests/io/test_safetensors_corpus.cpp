// Feeds every file of the fuzzer's corpus (fuzz/corpus/safetensors_header) through the file
// parser: files named valid-* must parse, bad-* must raise a UserError, and nothing may raise
// anything else. Keeps the malformed-header cases the fuzzer found (or seeded) checked in CI.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/safetensors.h"
#include "io_test_helpers.h"

namespace surogate::io {
namespace {

TEST(SafetensorsCorpus, EveryFileParsesOrFailsCleanly) {
  const std::filesystem::path corpus(SUROGATE_FUZZ_CORPUS);
  ASSERT_TRUE(std::filesystem::is_directory(corpus)) << corpus;
  size_t valid = 0, bad = 0;
  for (const auto& item : std::filesystem::directory_iterator(corpus)) {
    const std::string name = item.path().filename().string();
    SCOPED_TRACE(name);
    const std::string bytes = testing::read_bytes(item.path());
    auto span = std::as_bytes(std::span<const char>(bytes.data(), bytes.size()));
    bool parsed = false;
    try {
      parse_safetensors_layout(span, name);
      parsed = true;
    } catch (const UserError& error) {
      EXPECT_NE(std::string(error.what()).find(name), std::string::npos) << error.what();
    }
    if (name.starts_with("valid-")) {
      EXPECT_TRUE(parsed);
      ++valid;
    } else if (name.starts_with("bad-")) {
      EXPECT_FALSE(parsed);
      ++bad;
    }
  }
  EXPECT_GE(valid, 3u);
  EXPECT_GE(bad, 15u);
}

}  // namespace
}  // namespace surogate::io
