// Every `surogate <command>` is declared here and defined in its own command_<name>.cpp.
// A command registers its CLI11 subcommand and returns the function that runs it.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace surogate::cli {

// Runs a parsed command and returns the process exit code.
using CommandRunner = std::function<int()>;

struct Command {
  CLI::App* app;
  CommandRunner run;
};

Command register_info_command(CLI::App& parent);
Command register_sft_command(CLI::App& parent);
Command register_pt_command(CLI::App& parent);

}  // namespace surogate::cli
