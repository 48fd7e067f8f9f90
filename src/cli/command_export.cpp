// `surogate export --model DIR [--adapter DIR] --output FILE.gguf --type f16|bf16|q8_0|q4_k_m`:
// writes a model (with a LoRA adapter merged in) as one GGUF file for llama.cpp, Ollama and
// LM Studio, named, described and quantized as llama.cpp's own converter and llama-quantize do
// (gguf/export.h, docs/formats.md "GGUF").
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/commands.h"
#include "gguf/export.h"

namespace surogate::cli {
namespace {

struct ExportArguments {
  std::string model;
  std::string adapter;
  std::string output;
  std::string type;
};

int run_export(const ExportArguments& arguments) {
  gguf::ExportOptions options;
  options.model = arguments.model;
  if (!arguments.adapter.empty()) options.adapter = std::filesystem::path(arguments.adapter);
  options.output = arguments.output;
  options.type = gguf::parse_export_type(arguments.type);
  const gguf::ExportSummary summary = gguf::export_gguf(options);
  std::string types;
  for (const auto& [type, count] : summary.tensors_by_type) {
    types += fmt::format("{}{} {}", types.empty() ? "" : ", ", count, gguf::type_name(type));
  }
  const std::string merged =
      options.adapter ? fmt::format(", {} adapted projections merged", summary.merged_projections) : "";
  fmt::print("wrote {} ({}, {}, {} tensors: {}{}; {:.1f} MB)\n", arguments.output, summary.architecture,
             gguf::export_type_name(options.type), summary.tensors, types, merged,
             static_cast<double>(summary.file_bytes) / 1e6);
  return 0;
}

}  // namespace

Command register_export_command(CLI::App& parent) {
  auto arguments = std::make_shared<ExportArguments>();
  CLI::App* app = parent.add_subcommand("export", "Write a model (and a merged LoRA adapter) as a GGUF file for llama.cpp");
  app->add_option("--model", arguments->model, "Model folder (config.json, safetensors, tokenizer.json)")->required();
  app->add_option("--adapter", arguments->adapter,
                  "PEFT LoRA adapter folder to merge first (adapter_config.json + adapter_model.safetensors)");
  app->add_option("--output", arguments->output, "The .gguf file to write")->required();
  app->add_option("--type", arguments->type, "Tensor encoding: f16, bf16, q8_0 or q4_k_m")->required();
  return Command{app, [arguments] { return run_export(*arguments); }};
}

const CommandRegistration kExportRegistration{95, register_export_command};

}  // namespace surogate::cli
