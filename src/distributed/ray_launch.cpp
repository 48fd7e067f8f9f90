// The hand-over to the Ray driver; see ray_launch.h.
#include "distributed/ray_launch.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::distributed {

void launch_through_ray(const RayLaunch& launch) {
  const char* python_override = std::getenv("SUROGATE_PYTHON");
  const std::string python = python_override != nullptr && *python_override != '\0' ? python_override : "python3";
  std::error_code error;
  const std::filesystem::path binary = std::filesystem::read_symlink("/proc/self/exe", error);
  SUROGATE_CHECK(!error, "/proc/self/exe names this binary: {}", error.message());
  std::vector<std::string> arguments = {python,
                                        "-c",
                                        kRayDriverScript,
                                        "--binary",
                                        binary.string(),
                                        "--cwd",
                                        std::filesystem::current_path().string(),
                                        "--num-nodes",
                                        std::to_string(launch.num_nodes),
                                        "--gpus-per-node",
                                        std::to_string(launch.gpus_per_node),
                                        "--ray-address",
                                        launch.ray_address};
  if (const char* timeout = std::getenv("SUROGATE_RAY_PLACEMENT_TIMEOUT"); timeout != nullptr && *timeout != '\0') {
    arguments.insert(arguments.end(), {"--placement-timeout", timeout});
  }
  arguments.push_back("--");
  arguments.insert(arguments.end(), launch.command.begin(), launch.command.end());
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execvp(python.c_str(), argv.data());
  fail_user("distributed.num_nodes: {} trains through Ray, whose driver runs on Python, but '{}' cannot be started "
            "({}); install Python 3 with Ray (`pip install ray`), or set SUROGATE_PYTHON to a Python that has it",
            launch.num_nodes, python, std::strerror(errno));
}

}  // namespace surogate::distributed
