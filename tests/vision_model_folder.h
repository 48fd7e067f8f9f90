// A Qwen2.5-VL folder the data path reads (tests of data_tests and train_tests): the fixture
// model's config.json with the real tokenizer's image id and vocabulary, the real Qwen tokenizer
// with Qwen2-VL's chat template, and a preprocessor_config.json (the fixture's, max_pixels 12544,
// unless given); the fixture's weights when asked for. The folder is the calling process's own
// (ctest runs the tests of one binary as parallel processes: a shared folder is rewritten while
// another test reads it).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace surogate::testing {

inline std::string fixture_text(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  std::stringstream text;
  text << stream.rdbuf();
  return text.str();
}

inline std::filesystem::path vision_model_folder(const std::string& name, const std::string& preprocessor_json = "",
                                                 bool weights = false) {
  namespace fs = std::filesystem;
  const fs::path vision = fs::path(SUROGATE_FIXTURES_DIR) / "vision";
  const fs::path folder = fs::path(::testing::TempDir()) / (name + "_" + std::to_string(::getpid()));
  fs::create_directories(folder);
  const fs::path tokenizer = fs::path(SUROGATE_TOKENIZERS_DIR) / "qwen3";
  fs::copy_file(tokenizer / "tokenizer.json", folder / "tokenizer.json", fs::copy_options::overwrite_existing);
  nlohmann::json tokenizer_config = nlohmann::json::parse(fixture_text(tokenizer / "tokenizer_config.json"));
  tokenizer_config["chat_template"] = fixture_text(vision / "rows" / "chat_template.jinja");
  std::ofstream(folder / "tokenizer_config.json") << tokenizer_config.dump();
  nlohmann::json config = nlohmann::json::parse(fixture_text(vision / "vl" / "config.json"));
  config["image_token_id"] = 151655;  // the real tokenizer's <|image_pad|>
  config["text_config"]["vocab_size"] = 151936;
  std::ofstream(folder / "config.json") << config.dump();
  if (preprocessor_json.empty()) {
    fs::copy_file(vision / "qwen2_5_vl" / "preprocessor_config.json", folder / "preprocessor_config.json",
                  fs::copy_options::overwrite_existing);
  } else {
    std::ofstream(folder / "preprocessor_config.json") << preprocessor_json;
  }
  if (weights) {
    fs::copy_file(vision / "vl" / "model.safetensors", folder / "model.safetensors",
                  fs::copy_options::overwrite_existing);
  }
  return folder;
}

}  // namespace surogate::testing
