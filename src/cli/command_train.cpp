// `surogate sft CONFIG` and `surogate pt CONFIG`: load and validate the run configuration, the
// model folder and the datasets, then train (train/trainer.h): alone, as one process of several
// that a launcher started (its variables: distributed/launcher_environment.h), or, with
// distributed.num_nodes > 1 and no launcher, by handing the run to the Ray driver, which starts
// this command on every node (distributed/ray_launch.h). --dry-run stops after validation
// and prints the predicted memory (train/memory_prediction.h; --gpu-memory for a GPU of another
// size) and the resolved configuration. With max_restarts > 0 this process supervises the
// training, run as a child process that is restarted after a failure (train/restart_supervisor.h).
// Exit codes: 0, 2 (the user's mistake), 1 (internal or CUDA error), 3 (training diverged).
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "data/pipeline.h"
#include "distributed/launcher_environment.h"
#include "distributed/ray_launch.h"
#include "io/hf_hub.h"
#include "io/object_store.h"
#include "io/model_config.h"
#include "train/memory_prediction.h"
#include "train/metrics_log.h"
#include "train/restart_supervisor.h"
#include "train/trainer.h"

namespace surogate::cli {
namespace {
namespace fs = std::filesystem;

struct TrainArguments {
  std::string config_path;
  bool dry_run = false;
  std::string gpu_memory;  // --gpu-memory: predict for a GPU of this size (dry run)
};

// "80GiB", "80 GB", "81920MiB", "85899345920": bytes. GiB / MiB / KiB are powers of 1024,
// GB / MB / KB of 1000, a bare number is bytes.
size_t parse_memory_size(const std::string& text) {
  size_t end = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  unit.erase(0, unit.find_first_not_of(' '));
  const std::pair<const char*, double> units[] = {{"", 1.0},         {"B", 1.0},   {"KiB", 1024.0},
                                                   {"MiB", 1 << 20},  {"GiB", 1 << 30}, {"TiB", 1099511627776.0},
                                                   {"KB", 1e3},       {"MB", 1e6},  {"GB", 1e9},
                                                   {"TB", 1e12}};
  for (const auto& [name, factor] : units) {
    if (end > 0 && unit == name && value > 0.0) return static_cast<size_t>(value * factor);
  }
  fail_user("--gpu-memory '{}': give a positive size such as 80GiB, 24GiB, 81920MiB or 80GB", text);
}

// A local folder is used as is. Anything else must be a hub id ("org/name[@revision]"): it is
// resolved through the Hugging Face cache (downloaded when online; with HF_HUB_OFFLINE=1 the cached
// snapshot, or a clear error asking for a local path), and config.model becomes that snapshot
// folder so every later stage reads local files only.
void validate_model_folder(Config& config) {
  fs::path folder(config.model);
  if (!fs::is_directory(folder)) {
    if (fs::exists(folder)) {
      fail_user("{}: model '{}' is a file; give a Hugging Face model folder (holding config.json) or a hub id "
                "like 'Qwen/Qwen3-0.6B'", config.source_of("model"), config.model);
    }
    if (!io::looks_like_repo_id(config.model)) {
      fail_user("{}: model '{}' is not a local folder (no such path) and not a Hugging Face hub id like "
                "'Qwen/Qwen3-0.6B'; check the path", config.source_of("model"), config.model);
    }
    try {
      folder = io::resolve_model(config.model);
    } catch (const UserError& error) {
      throw UserError(fmt::format("{}: model: {}", config.source_of("model"), error.what()));
    }
    config.model = folder.string();
  }
  // The IO module's loader checks config.json fully: valid JSON, a supported architecture,
  // required sizes, RoPE settings; its UserErrors name the file and key.
  io::load_model_config(folder);
}

void validate_datasets(const Config& config, bool pretraining) {
  for (const auto* list : {&config.datasets, &config.validation_datasets}) {
    const char* name = list == &config.datasets ? "datasets" : "validation_datasets";
    for (size_t i = 0; i < list->size(); ++i) {
      const DatasetConfig& dataset = (*list)[i];
      std::string key = fmt::format("{}[{}]", name, i);
      // A hub id (org/name) or an s3:// / gs:// URL is downloaded by the data pipeline; anything else must exist here.
      if (!fs::exists(dataset.path) && !io::looks_like_repo_id(dataset.path) && !io::is_object_store_url(dataset.path)) {
        fail_user("{}: {}.path '{}' does not exist: give a local file or folder, a hub dataset id (org/name), or an "
                  "s3:// / gs:// URL", config.source_of(key + ".path"), key, dataset.path);
      }
      if (pretraining && dataset.type != DatasetType::Text) {
        fail_user("{}: {}.type is '{}', but `surogate pt` trains on raw text: use type: text (or `surogate sft`)",
                  config.source_of(key + ".type"), key, to_string(dataset.type));
      }
    }
  }
}

// Training writes the token cache, checkpoints and outputs under these; an existing file there
// would fail only after tokenizing (or training).
void validate_output_folders(const Config& config) {
  for (const char* key : {"output_dir", "checkpoint_dir"}) {
    const std::string& folder = std::string(key) == "output_dir" ? config.output_dir
                                                                  : config.checkpoint_dir.value_or(config.output_dir);
    if (fs::exists(folder) && !fs::is_directory(folder)) {
      fail_user("{}: {} '{}' is a file; give a folder (it is created when missing)", config.source_of(key), key,
                folder);
    }
  }
}

// What training reads before it tokenizes: sequence_len / max_length against the model, the
// tokenizer files, the chat template, and that the tokenizer fits the model's vocabulary
// (data/vocabulary_check.h). Training itself does the same in the data pipeline.
void validate_text_tools(const Config& config) {
  data::load_text_tools(data::data_settings_from_config(config));
}

constexpr int kExitDiverged = 3;

// SUROGATE_TEST_FAULTS (tests only): failures to inject, "key=value,key=value" with the keys
// checkpoint_write_delay_ms, crash_after_step, error_after_step, nonfinite_loss_at_step,
// nonfinite_loss_from_step, and every_attempt=1 (a supervised run's restarts see them too; by
// default only its first attempt does). `attempt` is this process's attempt (0: the first).
train::InjectedFaults faults_from_environment(size_t attempt) {
  train::InjectedFaults faults;
  const char* text = std::getenv("SUROGATE_TEST_FAULTS");
  if (text == nullptr || *text == '\0') return faults;
  bool every_attempt = false;
  std::string rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string item = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const size_t equals = item.find('=');
    int64_t value = -1;
    try {
      if (equals != std::string::npos) value = std::stoll(item.substr(equals + 1));
    } catch (const std::exception&) {
      value = -1;
    }
    const std::string key = item.substr(0, equals);
    if (value < 0) fail_user("SUROGATE_TEST_FAULTS: '{}' is not key=non-negative-integer", item);
    if (key == "checkpoint_write_delay_ms") faults.checkpoint_write_delay = std::chrono::milliseconds(value);
    else if (key == "crash_after_step") faults.crash_after_step = value;
    else if (key == "error_after_step") faults.error_after_step = value;
    else if (key == "nonfinite_loss_at_step") faults.nonfinite_loss_at_step = value;
    else if (key == "nonfinite_loss_from_step") faults.nonfinite_loss_from_step = value;
    else if (key == "every_attempt") every_attempt = value != 0;
    else fail_user("SUROGATE_TEST_FAULTS: unknown fault '{}' (checkpoint_write_delay_ms, crash_after_step, "
                   "error_after_step, nonfinite_loss_at_step, nonfinite_loss_from_step, every_attempt)", key);
  }
  return attempt == 0 || every_attempt ? faults : train::InjectedFaults{};
}

// Trains in this process, or (max_restarts > 0 and not already a supervised child) supervises a
// child process that does.
int train_or_supervise(const Config& config, const TrainArguments& arguments, const std::vector<std::string>& extras,
                       bool pretraining) {
  train::TrainerOptions options;
  options.processes = distributed::read_launcher_environment();
  if (config.max_restarts > 0 && (options.processes || config.distributed.num_nodes > 1)) {
    // One process of a world cannot restart alone: its peers would wait for it in a collective.
    fail_user("{}: max_restarts restarts a run of one process; this run has several (a launcher's RANK / WORLD_SIZE, "
              "or distributed.num_nodes > 1). Remove it and let the launcher restart the job (torchrun "
              "--max-restarts, srun --requeue)",
              config.source_of("max_restarts"));
  }
  if (config.distributed.num_nodes > 1 && !options.processes) {
    // Several machines and no launcher: Ray starts this command on every node (distributed/ray_launch.h).
    distributed::RayLaunch launch;
    launch.command = {pretraining ? "pt" : "sft", arguments.config_path};
    launch.command.insert(launch.command.end(), extras.begin(), extras.end());
    launch.num_nodes = config.distributed.num_nodes;
    launch.gpus_per_node = config.distributed.gpus_per_node > 0 ? config.distributed.gpus_per_node : config.gpus;
    launch.ray_address = config.distributed.ray_address;
    distributed::launch_through_ray(launch);
  }
  options.pretraining = pretraining;
  options.default_run_name = fs::path(arguments.config_path).stem().string();
  const std::optional<std::vector<train::RestartRecord>> restarts = train::supervised_restarts();
  if (!restarts && config.max_restarts > 0) {
    train::SupervisedRun run;
    run.arguments = {pretraining ? "pt" : "sft", arguments.config_path};
    run.arguments.insert(run.arguments.end(), extras.begin(), extras.end());
    run.max_restarts = static_cast<int>(config.max_restarts);
    run.log_file = config.log_file ? fs::path(*config.log_file)
                                   : train::default_log_path(config.output_dir,
                                                             config.run_name.value_or(options.default_run_name));
    run.checkpoint_dir = config.checkpoint_dir.value_or(config.output_dir);
    return train::supervise_training(run);
  }
  if (restarts) options.restarts = *restarts;
  options.faults = faults_from_environment(restarts ? restarts->size() : 0);
  try {
    train::run_training(config, options);
  } catch (const train::TrainingDiverged& error) {
    fmt::print(stderr, "error: {}\n", error.what());
    return kExitDiverged;
  }
  return 0;
}

int run_training_command(const TrainArguments& arguments, const std::vector<std::string>& extras, bool pretraining) {
  Config config = load_config(arguments.config_path, collect_overrides(extras));
  validate_model_folder(config);
  validate_datasets(config, pretraining);
  validate_output_folders(config);
  if (!arguments.gpu_memory.empty() && !arguments.dry_run) {
    fail_user("--gpu-memory '{}' predicts memory for a GPU of that size and needs --dry-run; training uses the GPU "
              "it runs on", arguments.gpu_memory);
  }
  std::optional<size_t> gpu_memory;
  if (!arguments.gpu_memory.empty()) gpu_memory = parse_memory_size(arguments.gpu_memory);
  if (!arguments.dry_run) return train_or_supervise(config, arguments, extras, pretraining);
  validate_text_tools(config);
  const train::MemoryPrediction prediction = train::predict_training_memory(config, gpu_memory);
  fmt::print("# {}: configuration is valid (dry run, nothing trained)\n", arguments.config_path);
  fmt::print("{}", train::format_memory_prediction(prediction));
  fmt::print("{}", dump_config_yaml(config));
  return 0;
}

Command register_training_command(CLI::App& parent, const char* name, const char* description, bool pretraining) {
  auto arguments = std::make_shared<TrainArguments>();
  CLI::App* app = parent.add_subcommand(name, description);
  app->add_option("config", arguments->config_path, "YAML configuration file")->required();
  app->add_flag("--dry-run", arguments->dry_run,
                "Validate config, model folder and datasets; print the predicted memory and the resolved config");
  app->add_option("--gpu-memory", arguments->gpu_memory,
                  "With --dry-run: predict the memory for a GPU of this size (e.g. 80GiB, 24GiB)");
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

const CommandRegistration kSftRegistration{70, register_sft_command};
const CommandRegistration kPtRegistration{80, register_pt_command};

}  // namespace surogate::cli
