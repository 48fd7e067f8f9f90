// Shared flags of generate and chat (generation_flags.h).
#include "cli/generation_flags.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "cuda/device_info.h"
#include "generate/kv_cache_model.h"
#include "vision/vision_model_folder.h"

namespace surogate::cli {

void add_model_flags(CLI::App& app, ModelFlags& flags, bool with_adapter) {
  app.add_option("--model", flags.model, "HF model folder (config.json + safetensors)")->required();
  if (with_adapter) app.add_option("--adapter", flags.adapter, "PEFT LoRA adapter folder, applied unmerged");
  app.add_option("--model_definition,--model-definition", flags.model_definition,
                 "The architecture's Python DSL file (or its JSON IR)");
  app.add_option("--device", flags.device, "auto (a GPU when one is visible), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
}

void add_sampling_flags(CLI::App& app, SamplingFlags& flags) {
  app.add_option("--max_new_tokens,--max-new-tokens", flags.max_new_tokens,
                 "New tokens at most (default: generation_config.json's, else 256)")
      ->check(positive_count());
  app.add_option("--temperature", flags.temperature, "0 = greedy (default: generation_config.json's)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top_p,--top-p", flags.top_p, "Nucleus sampling mass (0, 1]");
  app.add_option("--top_k,--top-k", flags.top_k, "Keep the k most likely tokens (0 = off)");
  app.add_option("--min_p,--min-p", flags.min_p, "Drop tokens below min_p x the top probability");
  app.add_option("--repetition_penalty,--repetition-penalty", flags.repetition_penalty,
                 "Penalty for tokens already in the context (1 = off)");
  app.add_option("--do_sample,--do-sample", flags.do_sample, "true: sample, false: greedy");
  app.add_option("--stop", flags.stop, "A stop string (repeatable): the completion ends before it");
  app.add_option("--seed", flags.seed, "Seed of the sampling");
  app.add_option("--enable_thinking,--enable-thinking", flags.enable_thinking,
                 "true / false: passed to the chat template (Qwen3's thinking switch)");
}

generate::SamplingOptions sampling_options(const SamplingFlags& flags, const generate::GenerationDefaults& defaults) {
  generate::SamplingOptions options = defaults.sampling;
  if (flags.temperature) {
    options.temperature = *flags.temperature;
    options.do_sample = *flags.temperature > 0.0;
  }
  if (flags.do_sample) options.do_sample = *flags.do_sample;
  if (flags.top_k) options.top_k = *flags.top_k;
  if (flags.top_p) options.top_p = *flags.top_p;
  if (flags.min_p) options.min_p = *flags.min_p;
  if (flags.repetition_penalty) options.repetition_penalty = *flags.repetition_penalty;
  generate::validate(options);
  return options;
}

int64_t new_token_budget(const SamplingFlags& flags, const generate::GenerationDefaults& defaults,
                         int64_t prompt_length, int64_t context, const std::string& what) {
  if (context > 0 && prompt_length >= context) {
    fail_user("{}: the prompt has {} tokens, as many as the model's context of {} (config.json "
              "max_position_embeddings) or more", what, prompt_length, context);
  }
  if (flags.max_new_tokens) {
    if (context > 0 && prompt_length + *flags.max_new_tokens > context) {
      fail_user("{}: a prompt of {} tokens plus --max_new_tokens {} exceeds the model's context of {} (config.json "
                "max_position_embeddings); lower --max_new_tokens", what, prompt_length, *flags.max_new_tokens, context);
    }
    return *flags.max_new_tokens;
  }
  const int64_t budget = std::max<int64_t>(1, generate::new_token_limit(defaults, prompt_length).value_or(256));
  return context > 0 ? std::min(budget, context - prompt_length) : budget;
}

bool cuda_requested(const ModelFlags& flags) {
  if (flags.device == "cpu") return false;
  std::string reason;
  const bool cuda = cuda::cuda_device_available(&reason);
  if (flags.device == "cuda" && !cuda) fail_user("--device cuda: {}", reason);
  return cuda;
}

void refuse_vision_language_folder(const std::string& command, const std::filesystem::path& model_dir) {
  if (const std::optional<std::string> architecture = vision::vision_language_architecture(model_dir)) {
    fail_user("surogate {}: --model {} is a vision-language model ({}); `surogate {}` runs text models only so far. "
              "`surogate generate` runs this folder, images included (docs/vision.md)",
              command, model_dir.string(), *architecture, command);
  }
}

std::unique_ptr<generate::NextTokenModel> open_model(const ModelFlags& flags, int64_t slots, int64_t max_context,
                                                     const generate::NextTokenModel* weights_of) {
  const std::filesystem::path model_dir(flags.model);
  generate::ModelOptions options;
  options.adapter = flags.adapter;
  options.cuda = cuda_requested(flags);
  if (!flags.model_definition.empty()) {
    options.definition = {flags.model_definition, "--model_definition " + flags.model_definition, "--batch_size"};
    options.definition.model_dir = model_dir;
  }
  options.slots = slots;
  options.max_context = max_context;
  if (weights_of != nullptr) return generate::open_kv_cache_adapter(*weights_of, model_dir, options);
  return generate::open_kv_cache_model(model_dir, options);
}

void report_speed(const generate::GenerationStats& stats) {
  const double rate = stats.decode_seconds > 0 ? static_cast<double>(stats.decode_steps) / stats.decode_seconds : 0.0;
  const std::string shared =
      stats.shared_prompt_tokens > 0 ? fmt::format(" (and {} shared)", stats.shared_prompt_tokens) : std::string();
  std::cerr << fmt::format("generated {} tokens for {} prompt tokens{}: prefill {:.3f} s, decode {:.3f} s ({} steps, "
                           "{:.1f} steps/s)\n",
                           stats.generated_tokens, stats.prompt_tokens, shared, stats.prefill_seconds,
                           stats.decode_seconds, stats.decode_steps, rate);
}

}  // namespace surogate::cli
