// Shared test fixtures: a byte-level codec (token = byte value, EOS 256, PAD 257) so expected
// ids and label masks can be written by hand, and a tiny ChatML-like renderer.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/sample.h"

namespace surogate::data::testing {

inline constexpr int32_t kEos = 256;
inline constexpr int32_t kPad = 257;

inline TextCodec byte_codec() {
  TextCodec codec;
  codec.encode = [](std::string_view text, bool) {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  };
  codec.decode = [](std::span<const int32_t> ids) {
    std::string text;
    for (int32_t id : ids) text += id < 256 ? std::string(1, static_cast<char>(id)) : (id == kEos ? "<eos>" : "<pad>");
    return text;
  };
  codec.eos_id = kEos;
  codec.pad_id = kPad;
  return codec;
}

// "<|role|>content<|end|>\n" per message; generation prompt "<|assistant|>".
inline ChatRenderer chatml_renderer() {
  return [](const nlohmann::json& messages, const nlohmann::json&, bool generation_prompt) {
    std::string text;
    for (const auto& m : messages) text += "<|" + m["role"].get<std::string>() + "|>" + m["content"].get<std::string>() + "<|end|>\n";
    if (generation_prompt) text += "<|assistant|>";
    return text;
  };
}

// The ids byte_codec gives `text`: one per byte.
inline std::vector<int32_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

// A row as a reader returns it from line `line` of `file`.
inline Row row_at(RowValue value, const std::string& file, size_t line) {
  Row row;
  row.value = std::move(value);
  row.origin = {file, line, true};
  return row;
}

inline std::filesystem::path write_file(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

inline std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("surogate_data_test_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace surogate::data::testing
