// The launcher variables; see launcher_environment.h.
#include "distributed/launcher_environment.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::distributed {
namespace {

constexpr const char* kTorchrunHint =
    "the launcher variables are RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, as torchrun sets them "
    "(docs/training.md, \"Several processes and machines\")";

// Which variables name each part of the world: torchrun's or srun's.
struct Names {
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;  // nullptr: the launcher does not give it
  const char* source;
};
constexpr Names kTorchrun{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "RANK / WORLD_SIZE (torchrun)"};
constexpr Names kSlurm{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr, "SLURM_PROCID / SLURM_NTASKS (srun)"};

int parse_count(const std::string& name, const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [where, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || where != end) {
    fail_user("{}='{}' is not a whole number; {}", name, text, kTorchrunHint);
  }
  if (value < 0) fail_user("{}={} is negative; {}", name, value, kTorchrunHint);
  return value;
}

std::optional<int> optional_count(const EnvironmentLookup& lookup, const char* name) {
  if (name == nullptr) return std::nullopt;
  std::optional<std::string> text = lookup(name);
  if (!text) return std::nullopt;
  return parse_count(name, *text);
}

std::chrono::milliseconds timeout_from(const EnvironmentLookup& lookup) {
  std::optional<std::string> text = lookup("SUROGATE_DISTRIBUTED_TIMEOUT");
  if (!text) return std::chrono::minutes(10);
  char* end = nullptr;
  const double seconds = std::strtod(text->c_str(), &end);
  if (text->empty() || end != text->c_str() + text->size() || !std::isfinite(seconds) || seconds <= 0.0) {
    fail_user("SUROGATE_DISTRIBUTED_TIMEOUT='{}' must be a positive number of seconds (how long a process waits "
              "for the others before it stops the run; default 600)", *text);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

ProcessWorldSpec read_world(const EnvironmentLookup& lookup, const Names& names) {
  ProcessWorldSpec spec;
  spec.source = names.source;
  std::optional<std::string> rank = lookup(names.rank), size = lookup(names.size);
  if (!rank || !size) {
    fail_user("{} is set but {} is not: a launcher sets both (this process's rank and the number of processes); {}",
              rank ? names.rank : names.size, rank ? names.size : names.rank, kTorchrunHint);
  }
  spec.rank = parse_count(names.rank, *rank);
  spec.size = parse_count(names.size, *size);
  if (spec.size < 1) fail_user("{}={} must be at least 1 (the number of processes of the run)", names.size, spec.size);
  if (spec.rank >= spec.size) {
    fail_user("{}={} is not below {}={}: ranks count from 0 to {} − 1", names.rank, spec.rank, names.size, spec.size,
              names.size);
  }
  spec.local_rank = optional_count(lookup, names.local_rank).value_or(0);
  spec.local_size = optional_count(lookup, names.local_size).value_or(0);
  if (spec.local_size > 0 && spec.local_rank >= spec.local_size) {
    fail_user("{}={} is not below {}={}", names.local_rank, spec.local_rank, names.local_size, spec.local_size);
  }
  spec.timeout = timeout_from(lookup);
  if (spec.size == 1) return spec;
  std::optional<std::string> address = lookup("MASTER_ADDR"), port = lookup("MASTER_PORT");
  if (!address || address->empty()) {
    fail_user("MASTER_ADDR is not set, but {}={} asks for {} processes: set MASTER_ADDR to the host name or address "
              "of the machine running rank 0 (and MASTER_PORT to a free port there), as torchrun does; under srun: "
              "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1) MASTER_PORT=29500",
              names.size, spec.size, spec.size);
  }
  if (!port) {
    fail_user("MASTER_PORT is not set, but {}={} asks for {} processes: set it to a free TCP port on {} (rank 0 "
              "listens there for the others), e.g. MASTER_PORT=29500", names.size, spec.size, spec.size, *address);
  }
  const int number = parse_count("MASTER_PORT", *port);
  if (number < 1 || number > 65535) {
    fail_user("MASTER_PORT={} is not a TCP port: give one between 1 and 65535 (e.g. 29500)", *port);
  }
  spec.master_address = *address;
  spec.master_port = number;
  return spec;
}

}  // namespace

std::optional<ProcessWorldSpec> read_launcher_environment(const EnvironmentLookup& lookup) {
  std::optional<ProcessWorldSpec> spec;
  if (lookup("RANK") || lookup("WORLD_SIZE")) {
    spec = read_world(lookup, kTorchrun);
  } else if (lookup("SLURM_STEP_ID") && (lookup("SLURM_PROCID") || lookup("SLURM_NTASKS"))) {
    spec = read_world(lookup, kSlurm);
  }
  if (!spec || spec->size == 1) return std::nullopt;
  return spec;
}

std::optional<ProcessWorldSpec> read_launcher_environment() {
  return read_launcher_environment([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace surogate::distributed
