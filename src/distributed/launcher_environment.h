// A world of processes as launchers describe it in the environment, read once and checked.
// torchrun (and the launchers that copy it) sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT; Slurm's srun sets SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID for
// every task of a step (SLURM_STEP_ID marks a task srun started; the batch script itself is not
// one), and the user exports MASTER_ADDR / MASTER_PORT (srun has no rendezvous of its own).
// The torchrun variables win when both are present (torchrun inside srun). The Ray driver
// (distributed/ray_launch.h) starts its node workers with the torchrun variables too.
//
// Anything malformed is a UserError naming the variable and what to do; a world of one process
// (WORLD_SIZE=1, or no variables) is the ordinary single-process run and gives nullopt.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace surogate::distributed {

struct ProcessWorldSpec {
  int rank = 0;               // this process, 0 … size − 1
  int size = 1;               // processes in the run
  int local_rank = 0;         // this process among those of its machine (LOCAL_RANK / SLURM_LOCALID; 0 when unset)
  int local_size = 0;         // processes on its machine (LOCAL_WORLD_SIZE); 0 when the launcher does not say
  std::string master_address; // rank 0's host: its rendezvous store listens there
  int master_port = 0;
  // Bounds every wait on another process: the rendezvous and each collective. A process that dies
  // closes its connections, which fails its peers at once; the timeout catches one that hangs.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  std::string source;         // which variables described the world, for messages
};

// Reads a variable; nullopt when unset.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The world the variables describe, or nullopt for a single process. SUROGATE_DISTRIBUTED_TIMEOUT
// (seconds) overrides the 10-minute timeout.
std::optional<ProcessWorldSpec> read_launcher_environment(const EnvironmentLookup& lookup);
// The same, from this process's environment.
std::optional<ProcessWorldSpec> read_launcher_environment();

}  // namespace surogate::distributed
