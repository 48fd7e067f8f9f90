// `surogate generate --model DIR [--adapter DIR] [--device auto|cpu|cuda] (--prompt TEXT |
//  --input PROMPTS.jsonl --output OUT.jsonl) [sampling options]`: completions from a model folder
// (generate/, docs/generation.md). --prompt prints the completion; --input runs a file in batches
// and writes each row back with "completion_ids", "completion" (when the folder has a tokenizer)
// and "finish_reason", in input order. Sampling defaults come from the folder's
// generation_config.json, as transformers takes them; --temperature 0 is greedy.
// On a vision-language folder (Qwen2.5-VL, Qwen3-VL) rows may hold images (train/vl_generation_rows.h)
// and run in groups of --batch_size through train/vl_generation_model.h; --max_pixels overrides the
// folder's image processor.
#include <algorithm>
#include <fstream>
#include <functional>
#include <span>
#include <variant>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/generation_flags.h"
#include "core/error.h"
#include "generate/generation_defaults.h"
#include "generate/generator.h"
#include "generate/prompts.h"
#include "io/model_config.h"
#include "train/vision_stage.h"
#include "train/vl_generation_model.h"
#include "train/vl_generation_rows.h"
#include "vision/image_processor.h"
#include "vision/vision_model_folder.h"

namespace surogate::cli {
namespace {
namespace fs = std::filesystem;

struct GenerateArguments {
  ModelFlags model;
  SamplingFlags sampling;
  std::string prompt;
  std::string input;
  std::string output;
  int64_t batch_size = 8;
  std::optional<int64_t> max_pixels;
  bool verbose = false;
};

struct InputRow {
  nlohmann::ordered_json row;
  std::vector<int32_t> prompt;
  std::vector<vision::RgbImage> images;  // a vision-language folder's row's (resized)
  int64_t patches = 0;
};

// A row's prompt: (row, file, line) → ids and images.
using RowPrompt = std::function<InputRow(nlohmann::ordered_json, const std::string&, int64_t)>;

std::vector<InputRow> read_input_rows(const fs::path& path, const RowPrompt& prompt_of) {
  std::ifstream file(path);
  if (!file) fail_user("--input {}: cannot be read", path.string());
  std::vector<InputRow> rows;
  std::string line;
  for (int64_t number = 1; std::getline(file, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path.string(), number);
    nlohmann::ordered_json row;
    try {
      row = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::json::exception& error) {
      fail_user("{}: not valid JSON ({})", where, error.what());
    }
    rows.push_back(prompt_of(std::move(row), path.string(), number));
  }
  if (rows.empty()) fail_user("--input {}: the file has no rows", path.string());
  return rows;
}

// A vision-language folder's rows, in groups of --batch_size: each group's rows take the model's
// slots in order (row i of the group slot i, its images set there before the group runs; the engine
// admits them so, all at once), each prompt fed whole (its images' features are spliced over the
// whole run of image tokens). The plan holds the most patches one group's images have.
std::vector<generate::GenerationResult> generate_vision_rows(
    const GenerateArguments& arguments, const fs::path& model_dir, const std::string& architecture,
    const vision::ImageProcessorConfig& processor, std::vector<InputRow>& rows,
    const std::vector<generate::GenerationRequest>& requests, int64_t longest, const tokenizer::Tokenizer* codec,
    const generate::TextCallback& on_text, generate::GenerationStats& stats) {
  const size_t group = static_cast<size_t>(std::min<int64_t>(arguments.batch_size, static_cast<int64_t>(rows.size())));
  train::VisionGenerationOptions options;
  options.adapter = arguments.model.adapter;
  options.cuda = cuda_requested(arguments.model);
  options.slots = static_cast<int64_t>(group);
  options.max_context = longest;
  for (size_t first = 0; first < rows.size(); first += group) {
    int64_t patches = 0;
    for (size_t index = first; index < std::min(rows.size(), first + group); ++index) patches += rows[index].patches;
    options.plan_patches = std::max(options.plan_patches, patches);
  }
  train::VisionGenerationModel model(model_dir, architecture, processor, options);
  std::vector<generate::GenerationResult> results;
  for (size_t first = 0; first < rows.size(); first += group) {
    const size_t count = std::min(group, rows.size() - first);
    int64_t prompt_tokens = 0;
    for (size_t slot = 0; slot < count; ++slot) {
      model.set_images(static_cast<int64_t>(slot), std::move(rows[first + slot].images));
      prompt_tokens += static_cast<int64_t>(requests[first + slot].prompt.size());
    }
    generate::GenerationStats group_stats;
    const generate::TextCallback offset = on_text ? generate::TextCallback([&on_text, first](size_t index, const std::string& delta) {
      on_text(first + index, delta);
    }) : generate::TextCallback{};
    for (generate::GenerationResult& result :
         generate::generate(model, std::span(requests).subspan(first, count), codec, offset, &group_stats, prompt_tokens)) {
      results.push_back(std::move(result));
    }
    stats += group_stats;
  }
  return results;
}

int run_generate(const GenerateArguments& arguments) {
  const fs::path model_dir(arguments.model.model);
  if (!fs::is_directory(model_dir)) fail_user("--model {}: not a folder; give a Hugging Face model folder", model_dir.string());
  if (arguments.prompt.empty() == arguments.input.empty()) fail_user("give either --prompt TEXT or --input FILE.jsonl");
  if (!arguments.input.empty() && arguments.output.empty()) fail_user("--input needs --output FILE.jsonl");
  if (!arguments.output.empty() && arguments.input.empty()) fail_user("--output goes with --input");
  if (!arguments.input.empty() && fs::exists(arguments.output) && fs::equivalent(arguments.input, arguments.output)) {
    fail_user("--output {}: must not be the --input file", arguments.output);
  }
  const generate::GenerationDefaults defaults = generate::read_generation_defaults(model_dir);
  const generate::SamplingOptions sampling = sampling_options(arguments.sampling, defaults);

  generate::PromptBuilder prompts(model_dir, arguments.sampling.enable_thinking);
  const std::optional<std::string> vision_language = vision::vision_language_architecture(model_dir);
  if (!vision_language && arguments.max_pixels) {
    fail_user("--max_pixels: {} is not a vision-language folder (Qwen2.5-VL, Qwen3-VL); remove the option",
              model_dir.string());
  }
  std::optional<vision::ImageProcessorConfig> processor;
  std::optional<train::VisionPromptRows> vision_rows;
  std::optional<train::VisionLanguageModel> folder;
  if (vision_language) {
    if (!arguments.model.model_definition.empty()) {
      fail_user("--model_definition: {} is a vision-language folder ({}), which runs its built-in graph; remove the "
                "option", model_dir.string(), *vision_language);
    }
    processor = vision::ImageProcessorConfig::from_folder(model_dir);
    if (arguments.max_pixels) {
      if (*arguments.max_pixels < processor->min_pixels) {
        fail_user("--max_pixels {} is below the image processor's min_pixels ({}): raise it", *arguments.max_pixels,
                  processor->min_pixels);
      }
      processor->max_pixels = *arguments.max_pixels;
    }
    const fs::path base_dir = arguments.input.empty() ? fs::current_path() : fs::absolute(arguments.input).parent_path();
    folder = train::read_vision_language_model(model_dir.string(), *vision_language);
    const int32_t image_pad = std::visit([](const auto& config) { return config.image_token_id; }, *folder);
    vision_rows.emplace(prompts, vision::ImageProcessor(*processor), image_pad, base_dir);
  }
  const RowPrompt prompt_of = [&](nlohmann::ordered_json row, const std::string& file, int64_t line) {
    if (!vision_rows) {
      std::vector<int32_t> prompt = prompts.from_row(row, fmt::format("{}:{}", file, line));
      return InputRow{std::move(row), std::move(prompt), {}, 0};
    }
    train::VisionPromptRow prompt = vision_rows->from_row(row, file, static_cast<uint64_t>(line));
    return InputRow{std::move(row), std::move(prompt.ids), std::move(prompt.images), prompt.patches};
  };
  std::vector<InputRow> rows;
  if (!arguments.prompt.empty()) {
    std::vector<int32_t> prompt = vision_rows ? vision_rows->from_text(arguments.prompt).ids : prompts.from_text(arguments.prompt);
    rows.push_back({nlohmann::ordered_json{{"prompt", arguments.prompt}}, std::move(prompt), {}, 0});
  } else {
    rows = read_input_rows(arguments.input, prompt_of);
  }
  std::vector<generate::GenerationRequest> requests;
  const int64_t context = folder ? train::vision_text_config(*folder).max_position_embeddings
                                 : io::load_model_config(model_dir).max_position_embeddings;
  int64_t longest = 0;
  for (size_t index = 0; index < rows.size(); ++index) {
    const int64_t prompt_length = static_cast<int64_t>(rows[index].prompt.size());
    const std::string row_name = arguments.prompt.empty() ? fmt::format("{} row {}", arguments.input, index + 1) : "--prompt";
    const int64_t max_new_tokens = new_token_budget(arguments.sampling, defaults, prompt_length, context, row_name);
    // Each row draws from its own stream: its tokens do not depend on the batch it ran in.
    requests.push_back({rows[index].prompt, sampling, static_cast<uint64_t>(arguments.sampling.seed) + index,
                        max_new_tokens, defaults.eos_token_ids, arguments.sampling.stop});
    longest = std::max<int64_t>(longest, prompt_length + max_new_tokens);
  }
  const tokenizer::Tokenizer* codec = prompts.has_tokenizer() ? &prompts.tokenizer() : nullptr;
  generate::GenerationStats stats;
  generate::TextCallback print = [](size_t, const std::string& delta) { std::cout << delta << std::flush; };
  const generate::TextCallback on_text = !arguments.prompt.empty() && codec != nullptr ? print : generate::TextCallback{};
  std::vector<generate::GenerationResult> results;
  if (vision_language) {
    results = generate_vision_rows(arguments, model_dir, *vision_language, *processor, rows, requests, longest, codec,
                                   on_text, stats);
  } else {
    std::unique_ptr<generate::NextTokenModel> model =
        open_model(arguments.model, std::min<int64_t>(arguments.batch_size, static_cast<int64_t>(requests.size())), longest);
    results = generate::generate(*model, requests, codec, on_text, &stats);
  }

  if (!arguments.prompt.empty()) {
    if (codec == nullptr) std::cout << nlohmann::json(results[0].completion_ids).dump();
    std::cout << "\n";
    if (arguments.verbose) report_speed(stats);
    return 0;
  }
  std::ofstream out(arguments.output);
  if (!out) fail_user("--output {}: cannot be written", arguments.output);
  for (size_t index = 0; index < rows.size(); ++index) {
    nlohmann::ordered_json line = rows[index].row;
    line["completion_ids"] = results[index].completion_ids;
    if (codec != nullptr) line["completion"] = results[index].completion;
    line["finish_reason"] = results[index].finish_reason;
    out << line.dump() << "\n";
  }
  if (!out) fail_user("--output {}: writing failed (disk full?)", arguments.output);
  report_speed(stats);
  return 0;
}

}  // namespace

Command register_generate_command(CLI::App& parent) {
  auto arguments = std::make_shared<GenerateArguments>();
  CLI::App* app = parent.add_subcommand("generate", "Completions from a model folder (and a LoRA adapter)");
  add_model_flags(*app, arguments->model);
  app->add_option("--prompt", arguments->prompt, "Prompt text; the completion is printed");
  app->add_option("--input", arguments->input,
                  "JSONL of {\"prompt\": text} | {\"messages\": [...]} | {\"input_ids\": [...]} rows");
  app->add_option("--output", arguments->output, "JSONL written with each input row's completion");
  add_sampling_flags(*app, arguments->sampling);
  app->add_option("--batch_size,--batch-size", arguments->batch_size, "Sequences generated at once")
      ->check(positive_count());
  app->add_option("--max_pixels,--max-pixels", arguments->max_pixels,
                  "Vision-language folders: the image processor's max_pixels (default: the folder's)")
      ->check(positive_count());
  app->add_flag("--verbose", arguments->verbose, "With --prompt: the speed line on stderr (always shown with --input)");
  return Command{app, [arguments] { return run_generate(*arguments); }};
}

const CommandRegistration kGenerateRegistration{105, register_generate_command};

}  // namespace surogate::cli
