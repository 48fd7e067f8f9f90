// Environment → HubSettings, with the same precedence as huggingface_hub.
#include "io/hub_settings.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <string_view>

#include "core/error.h"
#include "io/environment.h"

namespace surogate::io {
namespace {

bool truthy(const std::optional<std::string>& value) {
  if (!value) return false;
  std::string lower;
  for (char c : *value) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "1" || lower == "true" || lower == "yes" || lower == "on";
}

std::string trim_setting(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  return text.substr(start);
}

}  // namespace

HubSettings read_hub_settings() {
  HubSettings settings;
  if (auto endpoint = environment_variable("HF_ENDPOINT")) {
    settings.endpoint = *endpoint;
    while (settings.endpoint.ends_with('/')) settings.endpoint.pop_back();
  }
  settings.offline = truthy(environment_variable("HF_HUB_OFFLINE"));

  // HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface; empty when none is set
  // (then only an explicit HF_HUB_CACHE locates the cache, and there is no token file).
  std::filesystem::path home;
  if (auto hf_home = environment_variable("HF_HOME")) {
    home = *hf_home;
  } else if (auto xdg = environment_variable("XDG_CACHE_HOME")) {
    home = std::filesystem::path(*xdg) / "huggingface";
  } else if (auto user_home = environment_variable("HOME")) {
    home = std::filesystem::path(*user_home) / ".cache" / "huggingface";
  }
  if (auto cache = environment_variable("HF_HUB_CACHE")) {
    settings.cache_dir = *cache;
  } else if (auto legacy = environment_variable("HUGGINGFACE_HUB_CACHE")) {
    settings.cache_dir = *legacy;
  } else if (!home.empty()) {
    settings.cache_dir = home / "hub";
  } else {
    fail_user("cannot find the Hugging Face cache: set HF_HUB_CACHE or HF_HOME (HOME is not set)");
  }
  settings.cache_dir = std::filesystem::absolute(settings.cache_dir);

  if (auto token = environment_variable("HF_TOKEN")) {
    settings.token = trim_setting(*token);
  } else if (auto legacy_token = environment_variable("HUGGING_FACE_HUB_TOKEN")) {
    settings.token = trim_setting(*legacy_token);
  } else {
    std::optional<std::string> token_file = environment_variable("HF_TOKEN_PATH");
    if (!token_file && !home.empty()) token_file = (home / "token").string();
    std::ifstream stream(token_file.value_or(std::string()));
    std::string line;
    if (token_file && stream && std::getline(stream, line) && !trim_setting(line).empty()) settings.token = trim_setting(line);
  }
  if (settings.token && settings.token->empty()) settings.token.reset();

  if (auto timeout = environment_variable("HF_HUB_DOWNLOAD_TIMEOUT")) {
    char* end = nullptr;
    long value = std::strtol(timeout->c_str(), &end, 10);
    if (end == timeout->c_str() || *end != '\0' || value <= 0) {
      fail_user("HF_HUB_DOWNLOAD_TIMEOUT is '{}'; set it to a positive number of seconds", *timeout);
    }
    settings.timeout_seconds = value;
  }
  return settings;
}

}  // namespace surogate::io
