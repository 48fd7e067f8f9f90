// `surogate generate --model DIR [--adapter DIR] [--device auto|cpu|cuda] (--prompt TEXT |
//  --input PROMPTS.jsonl --output OUT.jsonl) [sampling options]`: completions from a model folder
// (generate/, docs/generation.md). --prompt prints the completion; --input runs a file in batches
// and writes each row back with "completion_ids", "completion" (when the folder has a tokenizer)
// and "finish_reason", in input order. Sampling defaults come from the folder's
// generation_config.json, as transformers takes them; --temperature 0 is greedy.
#include <algorithm>
#include <fstream>
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
  bool verbose = false;
};

struct InputRow {
  nlohmann::ordered_json row;
  std::vector<int32_t> prompt;
};

std::vector<InputRow> read_input_rows(const fs::path& path, generate::PromptBuilder& prompts) {
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
    std::vector<int32_t> prompt = prompts.from_row(row, where);
    rows.push_back({std::move(row), std::move(prompt)});
  }
  if (rows.empty()) fail_user("--input {}: the file has no rows", path.string());
  return rows;
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
  std::vector<InputRow> rows;
  if (!arguments.prompt.empty()) {
    rows.push_back({nlohmann::ordered_json{{"prompt", arguments.prompt}}, prompts.from_text(arguments.prompt)});
  } else {
    rows = read_input_rows(arguments.input, prompts);
  }
  std::vector<generate::GenerationRequest> requests;
  const int64_t context = io::load_model_config(model_dir).max_position_embeddings;
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
  std::unique_ptr<generate::NextTokenModel> model =
      open_model(arguments.model, std::min<int64_t>(arguments.batch_size, static_cast<int64_t>(requests.size())), longest);
  const tokenizer::Tokenizer* codec = prompts.has_tokenizer() ? &prompts.tokenizer() : nullptr;
  generate::GenerationStats stats;

  if (!arguments.prompt.empty()) {
    generate::TextCallback print = [](size_t, const std::string& delta) {
      std::cout << delta << std::flush;
    };
    const std::vector<generate::GenerationResult> results =
        generate::generate(*model, requests, codec, codec != nullptr ? print : generate::TextCallback{}, &stats);
    if (codec == nullptr) std::cout << nlohmann::json(results[0].completion_ids).dump();
    std::cout << "\n";
    if (arguments.verbose) report_speed(stats);
    return 0;
  }
  const std::vector<generate::GenerationResult> results = generate::generate(*model, requests, codec, {}, &stats);
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
  app->add_flag("--verbose", arguments->verbose, "With --prompt: the speed line on stderr (always shown with --input)");
  return Command{app, [arguments] { return run_generate(*arguments); }};
}

const CommandRegistration kGenerateRegistration{105, register_generate_command};

}  // namespace surogate::cli
