// `surogate`: the command-line entry point. Parses the subcommand, runs it, and maps errors to
// exit codes: 0 success, 2 the user's mistake (UserError, bad arguments), 1 a bug in Surogate.
#include <cstdio>
#include <exception>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/version.h"
#include "core/error.h"

namespace {

constexpr int kExitSuccess = 0;
constexpr int kExitInternalError = 1;
constexpr int kExitUserError = 2;

}  // namespace

int main(int argc, char** argv) {
  using namespace surogate::cli;
  CLI::App app{"Surogate: fast LLM pre-training and fine-tuning on NVIDIA GPUs", "surogate"};
  app.set_version_flag("--version", std::string(surogate_version_string()));
  app.require_subcommand(1);

  std::vector<Command> commands = {
      register_info_command(app),
      register_sft_command(app),
      register_pt_command(app),
  };

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
  } catch (const std::exception& e) {
    fmt::print(stderr, "internal error (please report this as a bug): {}\n", e.what());
    return kExitInternalError;
  }
}
