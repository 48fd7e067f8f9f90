// A run configuration over a copy of a vision-language fixture folder (tests/fixtures/vision/vl or
// vision/qwen3_vl_model) with a processor of the tower's patch geometry (patch 4, merge 2), the
// Qwen3 tokenizer and the image rows' dataset: what train/vision_stage.h reads. Each test process
// copies into its own temporary folder, named by `prefix`, the fixture and the process id (ctest
// runs the tests of one binary as parallel processes: a shared folder raced one writing
// preprocessor_config.json against another reading it).
#pragma once

#include <unistd.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/config.h"

namespace surogate::train::vision_fixture {

inline Config vision_stage_config(const std::string& fixture, const std::string& prefix) {
  namespace fs = std::filesystem;
  const fs::path vision = fs::path(SUROGATE_FIXTURES_DIR) / "vision";
  const fs::path folder =
      fs::path(::testing::TempDir()) / (prefix + fixture + "_" + std::to_string(static_cast<long>(::getpid())));
  fs::create_directories(folder);
  for (const char* file : {"config.json", "model.safetensors"}) {
    fs::copy_file(vision / fixture / file, folder / file, fs::copy_options::overwrite_existing);
  }
  std::ofstream(folder / "preprocessor_config.json")
      << R"({"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 256, "max_pixels": 2048,)"
      << R"( "patch_size": 4, "temporal_patch_size": 2, "merge_size": 2})";
  fs::copy_file(fs::path(SUROGATE_TOKENIZERS_DIR) / "qwen3" / "tokenizer.json", folder / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  Config config;
  config.model.name_or_path = folder.string();
  config.model.sequence_len = 64;
  DatasetConfig dataset;
  dataset.path = (vision / "rows" / "rows.jsonl").string();
  dataset.type = DatasetType::Conversation;
  config.data.datasets = {dataset};
  return config;
}

}  // namespace surogate::train::vision_fixture
