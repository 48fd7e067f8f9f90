// `surogate sft CONFIG`, `surogate pt CONFIG`, `surogate dpo CONFIG` (preference tuning,
// docs/preference-tuning.md) and `surogate grpo CONFIG` (docs/grpo.md): load and validate the run configuration, the
// model folder and the datasets, then train (train/trainer.h): alone, as one process of several
// that a launcher started (its variables: distributed/launcher_environment.h), or, with
// distributed.num_nodes > 1 and no launcher, by handing the run to the Ray driver, which starts
// this command on every node (distributed/ray_launch.h). With max_restarts > 0 this process
// supervises the training, run as a child process that is restarted after a failure
// (train/supervise/restart_supervisor.h). --dry-run stops after validation and prints the predicted memory
// (train/memory_prediction.h; --gpu-memory for a GPU of another size) and the resolved
// configuration. Exit codes: 0, 2 (the user's mistake), 1 (internal or CUDA error), 3 (training
// diverged).
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "distributed/launcher_environment.h"
#include "distributed/ray_launch.h"
#include "train/memory_prediction.h"
#include "train/objective/preference_reference.h"
#include "train/observe/metrics_log.h"
#include "train/supervise/restart_supervisor.h"
#include "train/run_folder_lock.h"
#include "train/trainer.h"
#include "train/training_inputs.h"

namespace surogate::cli {
namespace {
namespace fs = std::filesystem;

struct TrainArguments {
  std::string command;  // sft, pt, dpo or grpo (the subcommand: restarts and Ray run it again)
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

constexpr int kExitDiverged = 3;

// Trains in this process, or (max_restarts > 0 and not already a supervised child) supervises a
// child process that does.
int train_or_supervise(const Config& config, const TrainArguments& arguments, const std::vector<std::string>& extras,
                       bool pretraining) {
  train::TrainerOptions options;
  options.processes = distributed::read_launcher_environment();
  if (config.run.max_restarts > 0 && (options.processes || config.distributed.num_nodes > 1)) {
    // One process of a world cannot restart alone: its peers would wait for it in a collective.
    fail_user("{}: max_restarts restarts a run of one process; this run has several (a launcher's RANK / WORLD_SIZE, "
              "or distributed.num_nodes > 1). Remove it and let the launcher restart the job (torchrun "
              "--max-restarts, srun --requeue)",
              config.sources.of("max_restarts"));
  }
  if (config.distributed.num_nodes > 1 && !options.processes) {
    // Several machines and no launcher: Ray starts this command on every node (distributed/ray_launch.h).
    distributed::RayLaunch launch;
    launch.command = {arguments.command, arguments.config_path};
    launch.command.insert(launch.command.end(), extras.begin(), extras.end());
    launch.num_nodes = config.distributed.num_nodes;
    launch.gpus_per_node =
        config.distributed.gpus_per_node > 0 ? config.distributed.gpus_per_node : config.parallel.gpus;
    launch.ray_address = config.distributed.ray_address;
    distributed::launch_through_ray(launch);
  }
  options.pretraining = pretraining;
  options.default_run_name = fs::path(arguments.config_path).stem().string();
  const std::optional<std::vector<train::RestartRecord>> restarts = train::supervised_restarts();
  if (!restarts && config.run.max_restarts > 0) {
    train::SupervisedRun run;
    run.arguments = {arguments.command, arguments.config_path};
    run.arguments.insert(run.arguments.end(), extras.begin(), extras.end());
    run.max_restarts = static_cast<int>(config.run.max_restarts);
    run.log_file = config.logging.log_file ? fs::path(*config.logging.log_file)
                                   : train::default_log_path(config.run.output_dir,
                                                             config.run.run_name.value_or(options.default_run_name));
    run.checkpoint_dir = config.checkpoint.checkpoint_dir.value_or(config.run.output_dir);
    // Held across every attempt: no other run can take the folders between a crash and its restart.
    const std::vector<io::FolderLock> locks = train::lock_run_folders(config.run, config.checkpoint);
    return train::supervise_training(run);
  }
  if (restarts) {
    options.restarts = *restarts;
    options.output_folders_locked = true;  // by the supervisor, this process's parent
  }
  // SUROGATE_TEST_FAULTS: failures tests inject (train/injected_faults.h).
  const char* faults = std::getenv("SUROGATE_TEST_FAULTS");
  options.faults = train::injected_faults_from_text(faults ? faults : "", restarts ? restarts->size() : 0);
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
  // surogate dpo: the preference objective (train/objective/); the feature-support table judges
  // the combinations it cannot run once the backend is chosen.
  config.loss.preference = arguments.command == "dpo";
  // surogate grpo: the GRPO objective (train/objective/grpo_objective.h); reward files are relative
  // to the config file's folder.
  config.grpo.enabled = arguments.command == "grpo";
  config.grpo.config_dir = fs::path(arguments.config_path).parent_path().string();
  train::prepare_training_inputs(config, pretraining);
  if (!arguments.gpu_memory.empty() && !arguments.dry_run) {
    fail_user("--gpu-memory '{}' predicts memory for a GPU of that size and needs --dry-run; training uses the GPU "
              "it runs on", arguments.gpu_memory);
  }
  std::optional<size_t> gpu_memory;
  if (!arguments.gpu_memory.empty()) gpu_memory = parse_memory_size(arguments.gpu_memory);
  if (!arguments.dry_run) return train_or_supervise(config, arguments, extras, pretraining);
  train::validate_text_tools(config);
  const train::MemoryPrediction prediction = train::predict_training_memory(config, gpu_memory);
  fmt::print("# {}: configuration is valid (dry run, nothing trained)\n", arguments.config_path);
  fmt::print("{}", train::format_memory_prediction(prediction));
  if (config.loss.preference) fmt::print("{}", train::describe_preference_reference(config));
  fmt::print("{}", dump_config_yaml(config));
  return 0;
}

Command register_training_command(CLI::App& parent, const char* name, const char* description, bool pretraining) {
  auto arguments = std::make_shared<TrainArguments>();
  arguments->command = name;
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

Command register_dpo_command(CLI::App& parent) {
  return register_training_command(
      parent, "dpo",
      "Preference tuning (DPO, IPO, SimPO, ORPO on {prompt, chosen, rejected} pairs; KTO on {prompt, completion, label} "
      "rows) from a YAML config",
      false);
}

Command register_grpo_command(CLI::App& parent) {
  return register_training_command(
      parent, "grpo", "Reinforcement learning (GRPO) on type: prompt rows with reward functions from a YAML config",
      false);
}

const CommandRegistration kSftRegistration{70, register_sft_command};
const CommandRegistration kGrpoRegistration{77, register_grpo_command};
const CommandRegistration kDpoRegistration{75, register_dpo_command};
const CommandRegistration kPtRegistration{80, register_pt_command};

}  // namespace surogate::cli
