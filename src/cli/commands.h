// Every `surogate <command>` lives in its own command_<name>.cpp, which defines a function that
// adds its CLI11 subcommand and registers that function at namespace scope:
//   const CommandRegistration kRegistration{kOrder, register_info_command};
// main.cpp adds every registered command, so a new command needs no edit outside its own file.
#pragma once

#include <charconv>
#include <cstdint>
#include <functional>
#include <string>
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

// A count option (--batch-size, --seq-len, ...): a whole number of at least 1. CLI11's
// PositiveNumber would print its double range (a 309-digit number) for 0.
inline CLI::Validator positive_count() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        int64_t value = 0;
        const auto [end, error] = std::from_chars(input.data(), input.data() + input.size(), value);
        if (error == std::errc::result_out_of_range) return "'" + input + "' is too large";
        if (error != std::errc() || end != input.data() + input.size() || value < 1) {
          return "must be a whole number of at least 1, got '" + input + "'";
        }
        return {};
      },
      "COUNT >= 1");
}

// Every registered command, sorted by order.
std::vector<CommandFactory> registered_commands();

}  // namespace surogate::cli
