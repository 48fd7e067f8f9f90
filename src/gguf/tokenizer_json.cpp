#include "gguf/tokenizer_json.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace surogate::gguf {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<json> read_json(const fs::path& path) {
  if (!fs::exists(path)) return std::nullopt;
  std::ifstream stream(path, std::ios::binary);
  std::stringstream text;
  text << stream.rdbuf();
  json parsed = json::parse(text.str(), nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) fail_user("{}: not a valid JSON object", path.string());
  return parsed;
}

std::optional<std::string> token_content(const json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string()) {
    return entry["content"].get<std::string>();
  }
  return std::nullopt;
}

}  // namespace surogate::gguf
