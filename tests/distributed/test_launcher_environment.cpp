// The launcher variables: torchrun's and srun's worlds are read as they are set, a world of one
// (or none) is the single-process run, and every malformed or partial setting is a UserError
// naming the variable and what to do.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"
#include "distributed/launcher_environment.h"

namespace surogate::distributed {
namespace {

using Variables = std::map<std::string, std::string>;

std::optional<ProcessWorldSpec> read(const Variables& variables) {
  return read_launcher_environment([&](const std::string& name) -> std::optional<std::string> {
    auto found = variables.find(name);
    if (found == variables.end()) return std::nullopt;
    return found->second;
  });
}

// The UserError's message (fails the test when none is thrown).
std::string error_of(const Variables& variables) {
  try {
    read(variables);
  } catch (const UserError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no UserError";
  return "";
}

const Variables kTorchrun = {{"RANK", "1"},          {"WORLD_SIZE", "4"},          {"LOCAL_RANK", "1"},
                             {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "node0.cluster"}, {"MASTER_PORT", "29500"}};

TEST(LauncherEnvironment, NoVariablesOrAWorldOfOneIsASingleProcess) {
  EXPECT_FALSE(read({}).has_value());
  EXPECT_FALSE(read({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).has_value());
  // A batch script inside a Slurm allocation is not a task srun started: no SLURM_STEP_ID.
  EXPECT_FALSE(read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}).has_value());
}

TEST(LauncherEnvironment, ReadsTorchrunsVariables) {
  const std::optional<ProcessWorldSpec> spec = read(kTorchrun);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->rank, 1);
  EXPECT_EQ(spec->size, 4);
  EXPECT_EQ(spec->local_rank, 1);
  EXPECT_EQ(spec->local_size, 2);
  EXPECT_EQ(spec->master_address, "node0.cluster");
  EXPECT_EQ(spec->master_port, 29500);
  EXPECT_EQ(spec->timeout, std::chrono::minutes(10));
  EXPECT_NE(spec->source.find("torchrun"), std::string::npos);
}

TEST(LauncherEnvironment, ReadsSrunsVariablesAndTorchrunWinsOverThem) {
  const Variables srun = {{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "3"},        {"SLURM_NTASKS", "8"},
                          {"SLURM_LOCALID", "1"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29400"}};
  std::optional<ProcessWorldSpec> spec = read(srun);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->rank, 3);
  EXPECT_EQ(spec->size, 8);
  EXPECT_EQ(spec->local_rank, 1);
  EXPECT_EQ(spec->local_size, 0);
  EXPECT_NE(spec->source.find("srun"), std::string::npos);
  Variables both = srun;
  both.insert(kTorchrun.begin(), kTorchrun.end());
  spec = read(both);
  EXPECT_EQ(spec->size, 4);
  EXPECT_NE(spec->source.find("torchrun"), std::string::npos);
}

TEST(LauncherEnvironment, TheTimeoutCanBeSet) {
  Variables variables = kTorchrun;
  variables["SUROGATE_DISTRIBUTED_TIMEOUT"] = "2.5";
  EXPECT_EQ(read(variables)->timeout, std::chrono::milliseconds(2500));
  for (const char* bad : {"0", "-3", "soon", ""}) {
    variables["SUROGATE_DISTRIBUTED_TIMEOUT"] = bad;
    EXPECT_NE(error_of(variables).find("SUROGATE_DISTRIBUTED_TIMEOUT"), std::string::npos) << bad;
  }
}

TEST(LauncherEnvironment, MalformedOrPartialVariablesNameTheVariable) {
  struct Case {
    Variables changes;
    std::vector<std::string> removed;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{{"RANK", "one"}}, {}, "RANK='one' is not a whole number"},
      {{{"RANK", "1x"}}, {}, "RANK='1x' is not a whole number"},
      {{{"WORLD_SIZE", "-2"}}, {}, "WORLD_SIZE=-2 is negative"},
      {{{"WORLD_SIZE", "0"}}, {}, "WORLD_SIZE=0 must be at least 1"},
      {{{"RANK", "4"}}, {}, "RANK=4 is not below WORLD_SIZE=4"},
      {{}, {"RANK"}, "WORLD_SIZE is set but RANK is not"},
      {{}, {"WORLD_SIZE"}, "RANK is set but WORLD_SIZE is not"},
      {{{"LOCAL_RANK", "2"}}, {}, "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"},
      {{}, {"MASTER_ADDR"}, "MASTER_ADDR is not set"},
      {{}, {"MASTER_PORT"}, "MASTER_PORT is not set"},
      {{{"MASTER_PORT", "70000"}}, {}, "MASTER_PORT=70000 is not a TCP port"},
      {{{"MASTER_PORT", "0"}}, {}, "MASTER_PORT=0 is not a TCP port"},
      {{{"MASTER_PORT", "http"}}, {}, "MASTER_PORT='http' is not a whole number"},
  };
  for (const Case& c : cases) {
    Variables variables = kTorchrun;
    for (const auto& [name, value] : c.changes) variables[name] = value;
    for (const std::string& name : c.removed) variables.erase(name);
    EXPECT_NE(error_of(variables).find(c.expected), std::string::npos) << c.expected << " / " << error_of(variables);
  }
  // srun's tasks name srun's variables, and the missing address says how to set it under srun.
  const std::string srun = error_of({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  EXPECT_NE(srun.find("MASTER_ADDR is not set, but SLURM_NTASKS=2"), std::string::npos) << srun;
  EXPECT_NE(srun.find("scontrol show hostnames"), std::string::npos) << srun;
  EXPECT_NE(error_of({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"}}).find("SLURM_PROCID is set but SLURM_NTASKS is not"),
            std::string::npos);
}

}  // namespace
}  // namespace surogate::distributed
