// The Hugging Face environment variables the hub client honours, read once per call:
// HF_ENDPOINT, HF_TOKEN (or the token file written by `huggingface-cli login`), HF_HUB_OFFLINE,
// HF_HUB_CACHE / HF_HOME, HF_HUB_DOWNLOAD_TIMEOUT.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace surogate::io {

struct HubSettings {
  std::string endpoint = "https://huggingface.co";  // no trailing slash
  std::optional<std::string> token;
  bool offline = false;
  std::filesystem::path cache_dir;                  // absolute
  long timeout_seconds = 30;                        // connect timeout and stall limit
};

HubSettings read_hub_settings();

}  // namespace surogate::io
