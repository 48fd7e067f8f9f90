// `surogate download ID [--dataset] [--revision REV] [--include GLOB...]`: fetches a model (or
// dataset) from the Hugging Face Hub into the shared Hugging Face cache and prints the local
// snapshot folder, so a training machine can be prepared ahead of time (and later runs work with
// HF_HUB_OFFLINE=1). A local folder is printed as is.
#include <filesystem>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "io/hf_hub.h"
#include "io/hub_resolve.h"

namespace surogate::cli {
namespace {

struct DownloadOptions {
  std::string repo;
  bool dataset = false;
  std::string revision;
  std::vector<std::string> include;
};

int run_download(const DownloadOptions& options) {
  const io::RepoType type = options.dataset ? io::RepoType::Dataset : io::RepoType::Model;
  std::error_code error;
  std::filesystem::path path;
  const bool exists = std::filesystem::exists(options.repo, error);
  if (exists && (!options.revision.empty() || !options.include.empty())) {
    fail_user("'{}' is a local path: --revision and --include apply to hub ids only", options.repo);
  }
  if (exists || !io::looks_like_repo_id(options.repo)) {
    // A local path, or text that is no hub id: resolve_* names the problem (missing path, bad id).
    path = options.dataset ? io::resolve_dataset(options.repo) : io::resolve_model(options.repo);
  } else {
    path = io::resolve_hub_snapshot(options.repo, type, options.revision.empty() ? "main" : options.revision,
                                    options.include);
  }
  fmt::print("{}\n", path.string());
  return 0;
}

}  // namespace

Command register_download_command(CLI::App& parent) {
  auto options = std::make_shared<DownloadOptions>();
  CLI::App* app = parent.add_subcommand(
      "download", "Download a model (or dataset) from the Hugging Face Hub into its cache and print the local path");
  app->add_option("repo", options->repo, "Hub id 'org/name', optionally '@revision' (a local folder is printed as is)")
      ->required();
  app->add_flag("--dataset", options->dataset, "The id names a dataset repository, not a model");
  app->add_option("--revision", options->revision, "Branch, tag or commit to fetch (default: main; same as '@revision')");
  app->add_option("--include", options->include,
                  "Glob patterns of the repo files to fetch ('*' also matches '/'), e.g. 'data/train-*.parquet'; "
                  "default: every file of a dataset, the config, tokenizer and safetensors files of a model");
  app->footer(
      "Environment: HF_HUB_CACHE / HF_HOME (cache folder), HF_ENDPOINT, HF_TOKEN (gated or private repos), "
      "HF_HUB_OFFLINE=1 (use the cache only). See docs/hub.md.");
  return Command{app, [options] { return run_download(*options); }};
}

const CommandRegistration kDownloadRegistration{20, register_download_command};

}  // namespace surogate::cli
