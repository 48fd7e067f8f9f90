// Every `surogate <command>` lives in its own command_<name>.cpp, which defines a function that
// adds its CLI11 subcommand and registers that function at namespace scope:
//   const CommandRegistration kRegistration{kOrder, register_info_command};
// main.cpp adds every registered command, so a new command needs no edit outside its own file.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace surogate::cli {

// Runs a parsed command and returns the process exit code.
using CommandRunner = std::function<int()>;

struct Command {
  CLI::App* app;
  CommandRunner run;
};

using CommandFactory = Command (*)(CLI::App& parent);

// Registers `factory` at static-initialisation time; `order` is the command's place in --help.
struct CommandRegistration {
  CommandRegistration(int order, CommandFactory factory);
};

// Every registered command, sorted by order.
std::vector<CommandFactory> registered_commands();

}  // namespace surogate::cli
