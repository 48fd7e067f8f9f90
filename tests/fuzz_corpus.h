// Replays a libFuzzer seed folder (fuzz/corpus/<name>/) in CI, as the fuzz target would see each
// file: files named bad-* (minimised fuzzer findings) must be rejected with a UserError whose
// message names `must_name`; every other file must give a result or a UserError. Any other
// exception escapes and fails the test, so a fix that regresses shows up here without a fuzzer.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "core/error.h"

namespace surogate::testing {

struct CorpusCounts {
  size_t files = 0;
  size_t bad = 0;
};

inline CorpusCounts replay_fuzz_corpus(const std::string& name, const std::string& must_name,
                                       const std::function<void(const std::string& bytes)>& run_case) {
  const std::filesystem::path corpus = std::filesystem::path(SUROGATE_SOURCE_DIR) / "fuzz" / "corpus" / name;
  CorpusCounts counts;
  EXPECT_TRUE(std::filesystem::is_directory(corpus)) << corpus;
  if (!std::filesystem::is_directory(corpus)) return counts;
  for (const auto& item : std::filesystem::directory_iterator(corpus)) {
    const std::string file = item.path().filename().string();
    SCOPED_TRACE(file);
    std::ifstream stream(item.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
    bool rejected = false;
    try {
      run_case(bytes);
    } catch (const UserError& error) {
      rejected = true;
      EXPECT_NE(std::string(error.what()).find(must_name), std::string::npos) << error.what();
    }
    ++counts.files;
    if (file.starts_with("bad-")) {
      EXPECT_TRUE(rejected) << "a minimised fuzzer finding must be rejected with a UserError";
      ++counts.bad;
    }
  }
  return counts;
}

}  // namespace surogate::testing
