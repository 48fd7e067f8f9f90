// A run as one process of several; see process_run.h.
#include "train/process_run.h"

#include <chrono>
#include <filesystem>

#include <fmt/format.h>

namespace surogate::train {
namespace {
namespace fs = std::filesystem;

// Tokenizing a large dataset or writing a large model keeps the other processes waiting long;
// a process that stops closes its connections and fails the wait at once regardless.
constexpr std::chrono::hours kPatientWait(48);

}  // namespace

std::shared_ptr<data::TokenCache> load_process_token_cache(const Config& config, const std::string& run_name,
                                                           data::DataSettings settings,
                                                           distributed::ProcessWorld& world,
                                                           const std::function<void(const std::string&)>& log) {
  auto build = [&] { return data::load_or_build_cache(settings, {}, log); };
  if (world.alone()) return build();
  if (config.distributed.num_nodes > 1) {
    const fs::path base = config.distributed.worker_output_dir
                              ? fs::path(*config.distributed.worker_output_dir)
                              : fs::path(fmt::format("/tmp/surogate-{}", run_name));
    settings.cache_path = base / fmt::format("node-{}", world.rank()) / "tokenized" / "dataset.surotok";
    return build();
  }
  std::shared_ptr<data::TokenCache> cache;
  if (world.leads()) cache = build();
  world.barrier(kPatientWait);
  if (!cache && world.local_rank() == 0) cache = build();
  world.barrier(kPatientWait);
  return cache ? cache : build();
}

std::optional<TrainingState> share_resumed_state(distributed::ProcessWorld& world,
                                                 const std::optional<TrainingState>& restored_on_leader) {
  if (world.alone()) return restored_on_leader;
  const std::string text = world.broadcast(restored_on_leader ? to_json(*restored_on_leader).dump() : std::string());
  if (text.empty()) return std::nullopt;
  return training_state_from_json(nlohmann::json::parse(text), "the training state rank 0 resumed from");
}

void finish_together(distributed::ProcessWorld& world) { world.barrier(kPatientWait); }

}  // namespace surogate::train
