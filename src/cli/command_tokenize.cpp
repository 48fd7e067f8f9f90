// `surogate tokenize config.yaml`: tokenizes and packs the config's datasets into the token
// cache (<output_dir>/tokenized/dataset.surotok, or --output), reusing a valid cache and
// rebuilding a stale or corrupt one, then prints the data report. Training reads the same cache.
#include <unistd.h>

#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "cli/commands.h"
#include "config/config_loader.h"
#include "data/pipeline.h"
#include "io/folder_lock.h"

namespace surogate::cli {
namespace {

struct TokenizeArguments {
  std::string config_path;
  std::string output;
  bool force = false;
};

int run_tokenize(const TokenizeArguments& arguments, const std::vector<std::string>& extras) {
  Config config = load_config(arguments.config_path, collect_overrides(extras));
  data::DataSettings settings = data::data_settings_from_config(config);
  if (!arguments.output.empty()) settings.cache_path = arguments.output;
  // The default cache lives in output_dir: not while a run (or another tokenize) works there.
  std::optional<io::FolderLock> lock;
  if (arguments.output.empty()) lock.emplace(io::FolderLock::acquire(config.run.output_dir, "output_dir"));
  if (arguments.force) std::filesystem::remove(settings.cache_path);
  const bool terminal = isatty(fileno(stderr)) != 0;
  auto progress = [terminal](const std::string& dataset, uint64_t rows) {
    if (terminal) {
      fmt::print(stderr, "\r  {}: {} rows", dataset, rows);
      std::fflush(stderr);
    } else if (rows % 10000 == 0) {
      fmt::print(stderr, "  {}: {} rows\n", dataset, rows);
    }
  };
  auto log = [terminal](const std::string& line) { fmt::print(stderr, "{}{}\n", terminal ? "\r" : "", line); };
  auto cache = data::load_or_build_cache(settings, progress, log);
  if (terminal) fmt::print(stderr, "\n");
  fmt::print("token cache: {}\n", settings.cache_path.string());
  for (const auto& line : data::describe_report(cache->report())) fmt::print("{}\n", line);
  return 0;
}

}  // namespace

Command register_tokenize_command(CLI::App& parent) {
  auto arguments = std::make_shared<TokenizeArguments>();
  CLI::App* app = parent.add_subcommand("tokenize", "Tokenize and pack the config's datasets into the token cache");
  app->add_option("config", arguments->config_path, "YAML configuration file")->required();
  app->add_option("--output", arguments->output, "Cache file (default: <output_dir>/tokenized/dataset.surotok)");
  app->add_flag("--force", arguments->force, "Rebuild the cache even when it is up to date");
  app->allow_extras();
  app->footer("Any option of the configuration can be overridden: --key=value, --nested.key=value");
  return Command{app, [arguments, app] { return run_tokenize(*arguments, app->remaining()); }};
}

const CommandRegistration kTokenizeRegistration{50, register_tokenize_command};

}  // namespace surogate::cli
