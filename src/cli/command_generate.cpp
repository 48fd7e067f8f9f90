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
#include "core/error.h"
#include "cuda/device_info.h"
#include "generate/generation_defaults.h"
#include "generate/generator.h"
#include "generate/prompts.h"
#include "io/model_config.h"

namespace surogate::cli {
namespace {
namespace fs = std::filesystem;

struct GenerateArguments {
  std::string model;
  std::string adapter;
  std::string model_definition;
  std::string device = "auto";
  std::string prompt;
  std::string input;
  std::string output;
  std::optional<int64_t> max_new_tokens;
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  std::optional<bool> do_sample;
  std::vector<std::string> stop;
  int64_t seed = 0;
  int64_t batch_size = 8;
  std::optional<bool> enable_thinking;
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

// The sampling options: the folder's generation_config.json, then the flags. A --temperature given
// alone decides do_sample (above 0: sample), so `--temperature 0.7` samples even when the folder's
// default is greedy.
generate::SamplingOptions sampling_options(const GenerateArguments& arguments,
                                           const generate::GenerationDefaults& defaults) {
  generate::SamplingOptions options = defaults.sampling;
  if (arguments.temperature) {
    options.temperature = *arguments.temperature;
    options.do_sample = *arguments.temperature > 0.0;
  }
  if (arguments.do_sample) options.do_sample = *arguments.do_sample;
  if (arguments.top_k) options.top_k = *arguments.top_k;
  if (arguments.top_p) options.top_p = *arguments.top_p;
  if (arguments.min_p) options.min_p = *arguments.min_p;
  if (arguments.repetition_penalty) options.repetition_penalty = *arguments.repetition_penalty;
  generate::validate(options);
  return options;
}

// One line on stderr: prompt tokens and prefill time, generated tokens and decode speed.
void report_speed(const generate::GenerationStats& stats, bool shown) {
  if (!shown) return;
  const double decode_rate = stats.decode_seconds > 0 ? static_cast<double>(stats.decode_steps) / stats.decode_seconds : 0.0;
  std::cerr << fmt::format("generated {} tokens for {} prompt tokens: prefill {:.3f} s, decode {:.3f} s ({} steps, "
                           "{:.1f} steps/s)\n",
                           stats.generated_tokens, stats.prompt_tokens, stats.prefill_seconds, stats.decode_seconds,
                           stats.decode_steps, decode_rate);
}

bool use_cuda(const std::string& device) {
  if (device == "cpu") return false;
  std::string reason;
  const bool available = cuda::cuda_device_available(&reason);
  if (device == "cuda" && !available) fail_user("--device cuda: {}", reason);
  return available;
}

int run_generate(const GenerateArguments& arguments) {
  const fs::path model_dir(arguments.model);
  if (!fs::is_directory(model_dir)) fail_user("--model {}: not a folder; give a Hugging Face model folder", arguments.model);
  if (arguments.prompt.empty() == arguments.input.empty()) fail_user("give either --prompt TEXT or --input FILE.jsonl");
  if (!arguments.input.empty() && arguments.output.empty()) fail_user("--input needs --output FILE.jsonl");
  if (!arguments.output.empty() && arguments.input.empty()) fail_user("--output goes with --input");
  if (!arguments.input.empty() && fs::exists(arguments.output) && fs::equivalent(arguments.input, arguments.output)) {
    fail_user("--output {}: must not be the --input file", arguments.output);
  }
  const generate::GenerationDefaults defaults = generate::read_generation_defaults(model_dir);
  const generate::SamplingOptions sampling = sampling_options(arguments, defaults);

  generate::PromptBuilder prompts(model_dir, arguments.enable_thinking);
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
    // --max_new_tokens, else generation_config.json's max_new_tokens / max_length, else 256; a
    // default is cut to the model's context (config.json's max_position_embeddings), a flag is not.
    const int64_t prompt_length = static_cast<int64_t>(rows[index].prompt.size());
    const std::string row_name = arguments.prompt.empty() ? fmt::format("{} row {}", arguments.input, index + 1) : "--prompt";
    if (context > 0 && prompt_length >= context) {
      fail_user("{}: the prompt has {} tokens, as many as the model's context of {} (config.json "
                "max_position_embeddings) or more", row_name, prompt_length, context);
    }
    int64_t max_new_tokens = std::max<int64_t>(1, generate::new_token_limit(defaults, prompt_length).value_or(256));
    if (context > 0) max_new_tokens = std::min(max_new_tokens, context - prompt_length);
    if (arguments.max_new_tokens) {
      max_new_tokens = *arguments.max_new_tokens;
      if (context > 0 && prompt_length + max_new_tokens > context) {
        fail_user("{}: a prompt of {} tokens plus --max_new_tokens {} exceeds the model's context of {} (config.json "
                  "max_position_embeddings); lower --max_new_tokens", row_name, prompt_length, max_new_tokens, context);
      }
    }
    // Each row draws from its own stream: its tokens do not depend on the batch it ran in.
    requests.push_back({rows[index].prompt, sampling, static_cast<uint64_t>(arguments.seed) + index, max_new_tokens,
                        defaults.eos_token_ids, arguments.stop});
    longest = std::max<int64_t>(longest, prompt_length + max_new_tokens);
  }
  generate::ModelOptions model_options;
  model_options.adapter = arguments.adapter;
  model_options.cuda = use_cuda(arguments.device);
  if (!arguments.model_definition.empty()) {
    model_options.definition = {arguments.model_definition, "--model_definition " + arguments.model_definition,
                                "--batch_size"};
    model_options.definition.model_dir = model_dir;
  }
  model_options.slots = std::min<int64_t>(arguments.batch_size, static_cast<int64_t>(requests.size()));
  model_options.max_context = longest;
  std::unique_ptr<generate::NextTokenModel> model = generate::open_full_forward_model(model_dir, model_options);
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
    report_speed(stats, arguments.verbose);
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
  report_speed(stats, true);
  return 0;
}

}  // namespace

Command register_generate_command(CLI::App& parent) {
  auto arguments = std::make_shared<GenerateArguments>();
  CLI::App* app = parent.add_subcommand("generate", "Completions from a model folder (and a LoRA adapter)");
  app->add_option("--model", arguments->model, "HF model folder (config.json + safetensors)")->required();
  app->add_option("--adapter", arguments->adapter, "PEFT LoRA adapter folder, applied unmerged");
  app->add_option("--model_definition,--model-definition", arguments->model_definition,
                  "JSON IR of an architecture written in the Python DSL");
  app->add_option("--device", arguments->device, "auto (a GPU when one is visible), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app->add_option("--prompt", arguments->prompt, "Prompt text; the completion is printed");
  app->add_option("--input", arguments->input,
                  "JSONL of {\"prompt\": text} | {\"messages\": [...]} | {\"input_ids\": [...]} rows");
  app->add_option("--output", arguments->output, "JSONL written with each input row's completion");
  app->add_option("--max_new_tokens,--max-new-tokens", arguments->max_new_tokens,
                  "New tokens at most (default: generation_config.json's, else 256)")
      ->check(positive_count());
  app->add_option("--temperature", arguments->temperature, "0 = greedy (default: generation_config.json's)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--top_p,--top-p", arguments->top_p, "Nucleus sampling mass (0, 1]");
  app->add_option("--top_k,--top-k", arguments->top_k, "Keep the k most likely tokens (0 = off)");
  app->add_option("--min_p,--min-p", arguments->min_p, "Drop tokens below min_p x the top probability");
  app->add_option("--repetition_penalty,--repetition-penalty", arguments->repetition_penalty,
                  "Penalty for tokens already in the context (1 = off)");
  app->add_option("--do_sample,--do-sample", arguments->do_sample, "true: sample, false: greedy");
  app->add_option("--stop", arguments->stop, "A stop string (repeatable): the completion ends before it");
  app->add_option("--seed", arguments->seed, "Seed of the sampling (row i of --input uses seed + i)");
  app->add_option("--batch_size,--batch-size", arguments->batch_size, "Sequences generated at once")
      ->check(positive_count());
  app->add_option("--enable_thinking,--enable-thinking", arguments->enable_thinking,
                  "true / false: passed to the chat template (Qwen3's thinking switch)");
  app->add_flag("--verbose", arguments->verbose, "With --prompt: the speed line on stderr (always shown with --input)");
  return Command{app, [arguments] { return run_generate(*arguments); }};
}

const CommandRegistration kGenerateRegistration{105, register_generate_command};

}  // namespace surogate::cli
