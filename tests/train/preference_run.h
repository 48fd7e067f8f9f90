// `surogate dpo` in the trainer tests (CPU ranks, tests/train; GPUs, tests/train_cuda): a
// TrainerFixture::config() with its dataset replaced by examples/preference's reversal pairs for the
// quickstart model (the first 48 rows make_pairs.py writes; validation_split_ratio holds some out)
// and loss.preference set, as the `dpo` command sets it after loading the configuration.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "config/config.h"
#include "trainer_fixture.h"

namespace surogate::train {

// root/pairs.jsonl, written once per suite.
inline std::filesystem::path preference_pairs(const std::filesystem::path& root) {
  const std::filesystem::path pairs = root / "pairs.jsonl";
  if (std::filesystem::exists(pairs)) return pairs;
  const std::string command = fmt::format("python3 {}/examples/preference/make_pairs.py {} > /dev/null", source_dir(),
                                          (root / "pairs-all").string());
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream all(root / "pairs-all" / "train.jsonl");
  std::ofstream out(pairs);
  std::string line;
  for (int row = 0; row < 48 && std::getline(all, line); ++row) out << line << "\n";
  return pairs;
}

inline Config as_preference_run(Config config, const std::filesystem::path& pairs, const std::string& loss_type) {
  config.loss.preference = true;
  config.loss.type = loss_type;
  DatasetConfig& dataset = config.data.datasets.at(0);
  dataset.type = DatasetType::Preference;
  dataset.path = pairs.string();
  return config;
}

}  // namespace surogate::train
