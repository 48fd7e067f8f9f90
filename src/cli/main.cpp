// `surogate`: the command-line entry point. Parses the subcommand, runs it, and maps errors to
// exit codes: 0 success, 2 the user's mistake (UserError, bad arguments), 1 a bug in Surogate.
#include <cstdio>
#include <algorithm>
#include <exception>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/version.h"
#include "core/error.h"

namespace {

constexpr int kExitSuccess = 0;
constexpr int kExitInternalError = 1;
constexpr int kExitUserError = 2;

}  // namespace

namespace surogate::cli {
namespace {

std::vector<std::pair<int, CommandFactory>>& command_table() {
  static std::vector<std::pair<int, CommandFactory>> table;  // function-local: safe during static init
  return table;
}

}  // namespace

CommandRegistration::CommandRegistration(int order, CommandFactory factory) {
  command_table().emplace_back(order, factory);
}

std::vector<CommandFactory> registered_commands() {
  auto table = command_table();
  std::stable_sort(table.begin(), table.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<CommandFactory> factories;
  for (const auto& entry : table) factories.push_back(entry.second);
  return factories;
}

}  // namespace surogate::cli

int main(int argc, char** argv) {
  using namespace surogate::cli;
  CLI::App app{"Surogate: fast LLM pre-training and fine-tuning on NVIDIA GPUs", "surogate"};
  app.set_version_flag("--version", std::string(surogate_version_string()));
  app.require_subcommand(1);

  std::vector<Command> commands;
  for (CommandFactory factory : registered_commands()) commands.push_back(factory(app));

  // CLI11 answers an unknown first word with "A subcommand is required", which does not say which
  // word it did not know.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* subcommand : app.get_subcommands({})) names.push_back(subcommand->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      fmt::print(stderr, "error: '{}' is not a surogate command; the commands are: {} (surogate --help says what each "
                         "does)\n", argv[1], fmt::join(names, ", "));
      return kExitUserError;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUserError;
  }

  try {
    for (const auto& command : commands) {
      if (command.app->parsed()) return command.run();
    }
    return kExitUserError;
  } catch (const surogate::UserError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return kExitUserError;
  } catch (const std::bad_alloc&) {
    // Sizes come from the user's config and model: running out of host memory is theirs to fix.
    fmt::print(stderr, "error: out of host memory: the job does not fit in this machine's memory. Lower "
                       "sequence_len or per_device_train_batch_size, use a smaller model (the sizes in its "
                       "config.json), or run on a machine with more memory\n");
    return kExitUserError;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave (or one under output_dir) cannot be created, read or written.
    fmt::print(stderr, "error: {}: {}; check that the path is right and writable (and that the disk is not full)\n",
               e.path1().string(), e.code().message());
    return kExitUserError;
  } catch (const std::exception& e) {
    fmt::print(stderr, "internal error (please report this as a bug): {}\n", e.what());
    return kExitInternalError;
  }
}
