// `surogate sft CONFIG` and `surogate pt CONFIG`: load and validate the run configuration, the
// model folder and the datasets. Until the trainer lands, only --dry-run is available: it
// prints the resolved configuration and exits 0.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "config/config_loader.h"
#include "core/error.h"

namespace surogate::cli {
namespace {
namespace fs = std::filesystem;

struct TrainArguments {
  std::string config_path;
  bool dry_run = false;
};

void validate_model_folder(const Config& config) {
  fs::path folder(config.model);
  if (!fs::is_directory(folder)) {
    fail_user("{}: model '{}' is not a local folder (hub ids are resolved once downloading lands; give the path "
              "of a Hugging Face model folder)", config.source_of("model"), config.model);
  }
  fs::path config_json = folder / "config.json";
  std::ifstream in(config_json);
  if (!in) fail_user("model folder '{}' has no config.json: is it a Hugging Face model folder?", folder.string());
  auto parsed = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) fail_user("{}: not a valid JSON object", config_json.string());
}

void validate_datasets(const Config& config, bool pretraining) {
  for (const auto* list : {&config.datasets, &config.validation_datasets}) {
    const char* name = list == &config.datasets ? "datasets" : "validation_datasets";
    for (size_t i = 0; i < list->size(); ++i) {
      const DatasetConfig& dataset = (*list)[i];
      std::string key = fmt::format("{}[{}]", name, i);
      if (!fs::exists(dataset.path)) {
        fail_user("{}: {}.path '{}' does not exist (hub dataset ids are not downloaded yet: give a local file or "
                  "folder)", config.source_of(key + ".path"), key, dataset.path);
      }
      if (pretraining && dataset.type != "text") {
        fail_user("{}: {}.type is '{}', but `surogate pt` trains on raw text: use type: text (or `surogate sft`)",
                  config.source_of(key + ".type"), key, dataset.type);
      }
    }
  }
}

int run_training_command(const TrainArguments& arguments, const std::vector<std::string>& extras, bool pretraining) {
  Config config = load_config(arguments.config_path, collect_overrides(extras));
  validate_model_folder(config);
  validate_datasets(config, pretraining);
  if (!arguments.dry_run) {
    fail_user("training is not available in this build yet; `surogate {} {} --dry-run` validates the configuration",
              pretraining ? "pt" : "sft", arguments.config_path);
  }
  fmt::print("# {}: configuration is valid (dry run, nothing trained)\n", arguments.config_path);
  fmt::print("{}", dump_config_yaml(config));
  return 0;
}

Command register_training_command(CLI::App& parent, const char* name, const char* description, bool pretraining) {
  auto arguments = std::make_shared<TrainArguments>();
  CLI::App* app = parent.add_subcommand(name, description);
  app->add_option("config", arguments->config_path, "YAML configuration file")->required();
  app->add_flag("--dry-run", arguments->dry_run, "Validate config, model folder and datasets; print the resolved config");
  app->allow_extras();
  app->footer("Any option of the configuration can be overridden: --key=value, --nested.key=value");
  return Command{app, [arguments, app, pretraining] {
                   return run_training_command(*arguments, app->remaining(), pretraining);
                 }};
}

}  // namespace

Command register_sft_command(CLI::App& parent) {
  return register_training_command(parent, "sft", "Supervised fine-tuning (LoRA, QLoRA or full) from a YAML config",
                                   false);
}

Command register_pt_command(CLI::App& parent) {
  return register_training_command(parent, "pt", "Pretraining / continued pretraining on raw text from a YAML config",
                                   true);
}

}  // namespace surogate::cli
