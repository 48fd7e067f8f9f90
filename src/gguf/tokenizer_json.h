// Reading a model folder's tokenizer JSON files for the GGUF tokenizer keys: internal to
// gguf/vocab_metadata.cpp and gguf/special_tokens.cpp.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace surogate::gguf {

// The file's JSON object, nullopt when the file does not exist; anything but an object is a
// UserError naming the file.
std::optional<nlohmann::json> read_json(const std::filesystem::path& path);

// A token as tokenizer_config.json / added_tokens spell it: a string, or an object's "content".
std::optional<std::string> token_content(const nlohmann::json& entry);

}  // namespace surogate::gguf
