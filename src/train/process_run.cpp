// A run as one process of several; see process_run.h.
#include "train/process_run.h"

#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "distributed/parallel_layout.h"
#include "train/checkpoint_io.h"

namespace surogate::train {
namespace {
namespace fs = std::filesystem;

// Tokenizing a large dataset or writing a large model keeps the other processes waiting long;
// a process that stops closes its connections and fails the wait at once regardless.
constexpr std::chrono::hours kPatientWait(48);

}  // namespace

std::unique_ptr<distributed::ProcessWorld> connect_processes(const DistributedConfig& nodes,
                                                             const ConfigSources& sources,
                                                             const std::optional<distributed::ProcessWorldSpec>& spec) {
  distributed::ProcessPlacement placement;
  if (spec) placement = {spec->rank, spec->size};
  distributed::check_nodes_match_processes(nodes, sources, placement);
  return spec ? distributed::ProcessWorld::connect(*spec) : distributed::ProcessWorld::single();
}

std::shared_ptr<data::TokenCache> load_process_token_cache(const DistributedConfig& nodes,
                                                           const std::string& run_name,
                                                           data::DataSettings settings,
                                                           distributed::ProcessWorld& world,
                                                           const std::function<void(const std::string&)>& log) {
  auto build = [&] { return data::load_or_build_cache(settings, {}, log); };
  if (world.alone()) return build();
  if (nodes.num_nodes > 1) {
    const fs::path base = nodes.worker_output_dir
                              ? fs::path(*nodes.worker_output_dir)
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

std::optional<ResumedRun> resume_latest_checkpoint(distributed::ProcessWorld& world, const CheckpointStore& store,
                                                   TrainingDevice& device,
                                                   const std::function<void(const std::string&)>& warn) {
  const std::optional<fs::path> latest = world.leads() ? store.latest_verified(warn) : std::nullopt;
  if (world.broadcast(latest ? "found" : "") != "found") return std::nullopt;
  std::vector<StateTensor> optimizer_state = device.optimizer_state();  // on rank 0: every process's shards
  std::optional<TrainingState> restored;
  if (latest) restored = restore_checkpoint(*latest, device.trainable(), optimizer_state);
  device.upload();
  const std::string text = world.broadcast(restored ? to_json(*restored).dump() : std::string());
  if (!restored) restored = training_state_from_json(nlohmann::json::parse(text), "the training state rank 0 resumed");
  return ResumedRun{std::move(*restored), latest};
}

void wait_for_rank_zero(distributed::ProcessWorld& world) { world.barrier(kPatientWait); }

}  // namespace surogate::train
