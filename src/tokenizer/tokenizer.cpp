// Public Tokenizer: loading the two files, the tokenizer_config.json facts, and encode_batch's
// fan-out over all cores (workers pull small chunks of texts from a shared counter, each with its
// own workspace, so long and short texts balance and results land in input order).
#include "tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/tokenizer_model.h"

namespace surogate::tokenizer {
namespace {

// The JSON text of one tokenizer file; `source` names it in the error. Every nlohmann error is
// the user's (a syntax error, invalid UTF-8, or a number too large for a double: `1e999` is an
// out_of_range, not a parse_error).
nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    fail_user("{}: not valid JSON (byte {}): {}; re-download the file", source, e.byte, e.what());
  } catch (const nlohmann::json::exception& e) {
    fail_user("{}: not valid JSON: {}; re-download the file", source, e.what());
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) fail_user("{}: cannot open the file; check the path and permissions", path.string());
  std::stringstream buffer;
  buffer << file.rdbuf();
  return parse_json_text(buffer.str(), path.string());
}

// bos_token and friends are a string, an AddedToken object {"content": ...}, or null.
std::optional<std::string> config_token(const nlohmann::json& config, const char* key,
                                        const JsonPath& where) {
  const nlohmann::json* value = optional_field(config, key);
  if (!value) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  if (value->is_object()) return require_string(*value, "content", where.child(key));
  fail_at(where.child(key), fmt::format("expected a string or an object with \"content\", found {}",
                                        value->type_name()));
}

}  // namespace

Tokenizer Tokenizer::load(const std::filesystem::path& dir) {
  const std::filesystem::path tokenizer_path = dir / "tokenizer.json";
  if (!std::filesystem::exists(tokenizer_path)) {
    fail_user(
        "{}: not found; the tokenizer folder must contain tokenizer.json (the HF fast-tokenizer "
        "file)",
        tokenizer_path.string());
  }
  const nlohmann::json document = read_json_file(tokenizer_path);
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  const nlohmann::json config =
      std::filesystem::exists(config_path) ? read_json_file(config_path) : nlohmann::json::object();
  Tokenizer tokenizer;
  tokenizer.model_ = TokenizerModel::from_json(document, tokenizer_path.string());
  tokenizer.config_ = config;
  const JsonPath config_where(config_path.string());
  if (!config.is_object()) fail_at(config_where, "expected a JSON object at the top level");
  tokenizer.bos_token_ = config_token(config, "bos_token", config_where);
  tokenizer.eos_token_ = config_token(config, "eos_token", config_where);
  tokenizer.pad_token_ = config_token(config, "pad_token", config_where);
  tokenizer.unk_token_ = config_token(config, "unk_token", config_where);
  return tokenizer;
}

Tokenizer Tokenizer::from_json(const nlohmann::json& tokenizer_json,
                               const nlohmann::json& tokenizer_config,
                               const std::string& source_name) {
  Tokenizer tokenizer;
  tokenizer.model_ = TokenizerModel::from_json(tokenizer_json, source_name);
  tokenizer.config_ = tokenizer_config.is_null() ? nlohmann::json::object() : tokenizer_config;
  const JsonPath config_where(source_name + " (tokenizer_config)");
  if (!tokenizer.config_.is_object())
    fail_at(config_where, "expected a JSON object at the top level");
  tokenizer.bos_token_ = config_token(tokenizer.config_, "bos_token", config_where);
  tokenizer.eos_token_ = config_token(tokenizer.config_, "eos_token", config_where);
  tokenizer.pad_token_ = config_token(tokenizer.config_, "pad_token", config_where);
  tokenizer.unk_token_ = config_token(tokenizer.config_, "unk_token", config_where);
  return tokenizer;
}

Tokenizer Tokenizer::from_text(std::string_view tokenizer_json, const std::string& source_name) {
  return from_json(parse_json_text(tokenizer_json, source_name), nlohmann::json::object(), source_name);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  auto lease = model_->workspaces().acquire();
  model_->encode(text, add_special_tokens, *lease, ids);
  return ids;
}

std::vector<std::vector<int32_t>> Tokenizer::encode_batch(const std::vector<std::string>& texts,
                                                          bool add_special_tokens) const {
  std::vector<std::vector<int32_t>> results(texts.size());
  size_t total_bytes = 0;
  for (const std::string& text : texts) total_bytes += text.size();
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  // Below ~64 KiB of text, threads cost more than they save.
  const size_t workers = std::min({cores, texts.size(), std::max<size_t>(1, total_bytes / 65536)});
  const size_t chunk = std::clamp<size_t>(texts.size() / (workers * 16), 1, 256);
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto work = [&] {
    try {
      auto lease = model_->workspaces().acquire();
      for (;;) {
        const size_t begin = next.fetch_add(chunk);
        if (begin >= texts.size()) break;
        const size_t end = std::min(texts.size(), begin + chunk);
        for (size_t i = begin; i < end; ++i) {
          results[i].reserve(texts[i].size() / 3 + 4);
          model_->encode(texts[i], add_special_tokens, *lease, results[i]);
        }
      }
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next.store(texts.size());
    }
  };
  if (workers <= 1) {
    work();
  } else {
    std::vector<std::jthread> threads;
    threads.reserve(workers - 1);
    for (size_t i = 0; i + 1 < workers; ++i) threads.emplace_back(work);
    work();
  }
  if (failure) std::rethrow_exception(failure);
  return results;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return model_->decode(ids, skip_special_tokens);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return model_->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  const std::string* token = model_->id_to_token(id);
  if (!token) return std::nullopt;
  return *token;
}

size_t Tokenizer::vocab_size() const { return model_->vocab_size(); }

bool Tokenizer::is_special_token(int32_t id) const { return model_->is_special(id); }

std::optional<int32_t> Tokenizer::bos_token_id() const {
  return bos_token_ ? token_to_id(*bos_token_) : std::nullopt;
}
std::optional<int32_t> Tokenizer::eos_token_id() const {
  return eos_token_ ? token_to_id(*eos_token_) : std::nullopt;
}
std::optional<int32_t> Tokenizer::pad_token_id() const {
  return pad_token_ ? token_to_id(*pad_token_) : std::nullopt;
}

std::optional<std::string> Tokenizer::chat_template() const {
  const nlohmann::json* value = optional_field(config_, "chat_template");
  if (!value) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  // A list of named templates: the one called "default".
  if (value->is_array()) {
    for (const auto& entry : *value) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
  }
  return std::nullopt;
}

}  // namespace surogate::tokenizer
