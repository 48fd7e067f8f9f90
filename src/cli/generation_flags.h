// The flags `surogate generate`, `surogate chat` and `surogate serve` share: which model (folder, adapter, DSL
// definition, device) and how to sample (transformers' names), and the rules that turn them into
// a loaded model and per-prompt limits.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "generate/generation_defaults.h"
#include "generate/generator.h"
#include "generate/next_token_model.h"

namespace surogate::cli {

struct ModelFlags {
  std::string model;
  std::string adapter;
  std::string model_definition;
  std::string device = "auto";
};

struct SamplingFlags {
  std::optional<int64_t> max_new_tokens;
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  std::optional<bool> do_sample;
  std::vector<std::string> stop;
  int64_t seed = 0;
  std::optional<bool> enable_thinking;
};

// `with_adapter` false leaves --adapter to the command (serve takes NAME=DIR, repeatable).
void add_model_flags(CLI::App& app, ModelFlags& flags, bool with_adapter = true);
void add_sampling_flags(CLI::App& app, SamplingFlags& flags);

// The folder's generation_config.json, then the flags. A --temperature given alone decides
// do_sample (above 0: sample), so `--temperature 0.7` samples even where the folder's default is
// greedy. UserError naming the option for a value out of range.
generate::SamplingOptions sampling_options(const SamplingFlags& flags, const generate::GenerationDefaults& defaults);

// New tokens for a prompt: --max_new_tokens, else generation_config.json's max_new_tokens /
// max_length, else 256; a default is cut to `context` (config.json's max_position_embeddings, 0 =
// unknown), a flag beyond it is a UserError naming `what` (the row).
int64_t new_token_budget(const SamplingFlags& flags, const generate::GenerationDefaults& defaults,
                         int64_t prompt_length, int64_t context, const std::string& what);

// Whether the flags pick the CUDA backend (auto: a GPU when one is visible); UserError for
// --device cuda without one.
bool cuda_requested(const ModelFlags& flags);

// The one refusal of a vision-language folder (vision/vision_model_folder.h) by a command that
// runs text models only (`surogate chat`, `surogate serve`): a UserError naming the command, the
// folder and its architecture.
void refuse_vision_language_folder(const std::string& command, const std::filesystem::path& model_dir);

// The KV-cache model on the device the flags pick (auto: a GPU when one is visible); with
// `weights_of` (a model open_model returned for the same folder and device), one that reads its
// weights in place and holds only its adapter and caches.
std::unique_ptr<generate::NextTokenModel> open_model(const ModelFlags& flags, int64_t slots, int64_t max_context,
                                                     const generate::NextTokenModel* weights_of = nullptr);

// One line on stderr: prompt tokens and prefill time, generated tokens and decode speed.
void report_speed(const generate::GenerationStats& stats);

}  // namespace surogate::cli
