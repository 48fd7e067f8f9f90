// A synthetic model's config.json written into a folder of its own under the temp directory and
// read back as the loader reads a model folder (the decoder tests of runtime_cuda build their
// models from such configs).
#pragma once

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "io/model_config.h"

namespace surogate {

inline std::filesystem::path synthetic_config_dir(const std::string& folder) {
  return std::filesystem::temp_directory_path() / folder;
}

// Writes `config_json` into `dir` (made if missing; the caller removes it) and loads it.
inline io::ModelConfig load_synthetic_config(const std::filesystem::path& dir, const std::string& config_json) {
  std::filesystem::create_directories(dir);
  std::FILE* file = std::fopen((dir / "config.json").c_str(), "w");
  if (file == nullptr) throw std::runtime_error("cannot write " + (dir / "config.json").string());
  std::fputs(config_json.c_str(), file);
  std::fclose(file);
  return io::load_model_config(dir);
}

}  // namespace surogate
