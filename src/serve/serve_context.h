// What the routes share: the prompt builder (tokenizer and chat template of the model folder),
// the request defaults, and the scheduler of each served model by name.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "generate/generation_defaults.h"
#include "generate/prompts.h"
#include "serve/scheduler.h"

namespace surogate::serve {

struct ServeContext {
  ServeContext(const std::filesystem::path& model_dir, std::optional<bool> enable_thinking)
      : prompts(model_dir, enable_thinking) {}

  generate::PromptBuilder prompts;  // loads its tokenizer and template lazily: use under prompts_mutex
  std::mutex prompts_mutex;
  const tokenizer::Tokenizer* tokenizer = nullptr;  // loaded at startup, thread-safe
  generate::GenerationDefaults defaults;
  std::vector<std::string> names;  // in /v1/models order, the base model first
  std::map<std::string, std::unique_ptr<ModelScheduler>> schedulers;
};

}  // namespace surogate::serve
