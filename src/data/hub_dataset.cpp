// Hub dataset file choice and download; see hub_dataset.h.
#include "data/hub_dataset.h"

#include <fnmatch.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "data/dataset_files.h"
#include "data/row_reader.h"
#include "io/hub_cache.h"
#include "io/hub_resolve.h"

namespace surogate::data {
namespace {

namespace fs = std::filesystem;

constexpr const char* kParquetBranch = "refs/convert/parquet";

std::string join(const std::set<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

bool hidden(const std::string& path) {
  for (const auto& part : fs::path(path)) {
    if (!part.empty() && part.string()[0] == '.') return true;
  }
  return false;
}

bool readable(const std::string& path) { return !hidden(path) && is_supported_data_file(path); }

// fnmatch as huggingface_hub's data_files patterns mean it closely enough: '*' and '**' both
// cross '/'; a pattern without a wildcard names one file.
bool matches(const std::string& pattern, const std::string& path) {
  return ::fnmatch(pattern.c_str(), path.c_str(), 0) == 0;
}

// README.md's YAML header (between the first two '---' lines), or null.
YAML::Node readme_header(const std::string& readme, const std::string& dataset) {
  std::istringstream stream(readme);
  std::string line, header;
  auto next_line = [&] {
    if (!std::getline(stream, line)) return false;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
    return true;
  };
  if (!next_line() || line != "---") return {};
  bool closed = false;
  while (next_line()) {
    if (line == "---") {
      closed = true;
      break;
    }
    header += line + "\n";
  }
  if (!closed) return {};
  try {
    return YAML::Load(header);
  } catch (const YAML::Exception& error) {
    fail_user("dataset {}: the YAML header of its README.md cannot be read ({}); give a local copy instead",
              dataset, error.what());
  }
}

std::vector<std::string> strings_of(const YAML::Node& node) {
  std::vector<std::string> values;
  if (node.IsScalar()) values.push_back(node.as<std::string>());
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) {
      if (item.IsScalar()) values.push_back(item.as<std::string>());
    }
  }
  return values;
}

// data_files as split → patterns: a pattern or a list of them (the "train" split), a list of
// {split, path}, or a mapping split → pattern(s).
std::map<std::string, std::vector<std::string>> split_patterns(const YAML::Node& data_files) {
  std::map<std::string, std::vector<std::string>> splits;
  if (data_files.IsScalar()) {
    splits["train"] = strings_of(data_files);
  } else if (data_files.IsMap()) {
    for (const auto& entry : data_files) splits[entry.first.as<std::string>()] = strings_of(entry.second);
  } else if (data_files.IsSequence()) {
    for (const YAML::Node& item : data_files) {
      if (item.IsScalar()) {
        splits["train"].push_back(item.as<std::string>());
      } else if (item.IsMap() && item["split"] && item["path"]) {
        for (const auto& pattern : strings_of(item["path"])) splits[item["split"].as<std::string>()].push_back(pattern);
      }
    }
  }
  return splits;
}

// The config a dataset entry means among README's `configs`.
YAML::Node choose_config(const YAML::Node& configs, const DatasetConfig& dataset) {
  std::set<std::string> names;
  std::optional<YAML::Node> marked, named_default, only;
  for (const YAML::Node& config : configs) {
    if (!config.IsMap()) continue;
    const std::string name = config["config_name"] ? config["config_name"].as<std::string>() : "default";
    names.insert(name);
    if (dataset.subset && name == *dataset.subset) return config;
    if (config["default"] && config["default"].as<bool>(false)) marked.emplace(config);
    if (name == "default") named_default.emplace(config);
    only.emplace(config);
  }
  if (dataset.subset) {
    fail_user("dataset {}: subset '{}' is not one of its configurations: {}. Set `subset` to one of them",
              dataset.path, *dataset.subset, join(names));
  }
  if (marked) return *marked;
  if (named_default) return *named_default;
  if (names.size() == 1 && only) return *only;
  fail_user("dataset {} has several configurations ({}): set `subset` to one of them", dataset.path, join(names));
}

// Layout 2: folders and file names.
std::vector<std::string> choose_by_names(const DatasetConfig& dataset, const std::vector<std::string>& files,
                                         const std::string& prefix) {
  std::vector<fs::path> relative;
  std::set<std::string> folders;
  for (const std::string& file : files) {
    if (!readable(file)) continue;
    if (const size_t slash = file.find('/'); slash != std::string::npos) folders.insert(file.substr(0, slash));
    if (file.starts_with(prefix)) relative.push_back(file.substr(prefix.size()));
  }
  if (relative.empty()) {
    if (!prefix.empty() && !folders.empty()) {
      fail_user("dataset {}: subset '{}' is not a folder of the dataset; its folders with data files: {}",
                dataset.path, dataset.subset.value_or(""), join(folders));
    }
    return {};
  }
  std::sort(relative.begin(), relative.end());
  std::vector<std::string> chosen;
  for (const fs::path& path : choose_split_files(relative, dataset.split, dataset.path)) {
    chosen.push_back(prefix + path.string());
  }
  return chosen;
}

std::string glob_escape(const std::string& name) {
  std::string escaped;
  for (char c : name) {
    if (c == '*' || c == '?' || c == '[' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return escaped;
}

std::vector<fs::path> download(const io::HubRepo& repo, const std::string& revision,
                               const std::vector<std::string>& files) {
  std::vector<std::string> patterns;
  for (const std::string& file : files) patterns.push_back(glob_escape(file));
  const fs::path snapshot = io::resolve_hub_snapshot(repo.id, io::RepoType::Dataset, revision, patterns);
  std::vector<fs::path> local;
  for (const std::string& file : files) local.push_back(snapshot / file);
  return local;
}

}  // namespace

std::vector<std::string> choose_hub_dataset_files(const DatasetConfig& dataset, const std::vector<std::string>& files,
                                                  const std::optional<std::string>& readme) {
  const YAML::Node header = readme ? readme_header(*readme, dataset.path) : YAML::Node();
  if (header && header.IsMap() && header["configs"] && header["configs"].IsSequence()) {
    const YAML::Node config = choose_config(header["configs"], dataset);
    const std::string data_dir = config["data_dir"] ? config["data_dir"].as<std::string>() + "/" : "";
    if (!config["data_files"]) return choose_by_names(dataset, files, data_dir);
    const auto splits = split_patterns(config["data_files"]);
    auto found = splits.find(dataset.split);
    if (found == splits.end()) {
      std::set<std::string> names;
      for (const auto& [name, patterns] : splits) names.insert(name);
      fail_user("dataset {}: {}has no split '{}'; its splits: {}. Set `split`", dataset.path,
                dataset.subset ? fmt::format("subset '{}' ", *dataset.subset) : std::string(), dataset.split,
                join(names));
    }
    std::vector<std::string> chosen;
    for (const std::string& file : files) {
      for (const std::string& pattern : found->second) {
        if (readable(file) && matches(data_dir + pattern, file)) {
          chosen.push_back(file);
          break;
        }
      }
    }
    std::sort(chosen.begin(), chosen.end());
    return chosen;
  }
  return choose_by_names(dataset, files, dataset.subset ? *dataset.subset + "/" : "");
}

std::vector<std::string> choose_converted_parquet_files(const DatasetConfig& dataset,
                                                        const std::vector<std::string>& files) {
  std::set<std::string> configs;
  for (const std::string& file : files) {
    if (const size_t slash = file.find('/'); slash != std::string::npos && file.ends_with(".parquet")) {
      configs.insert(file.substr(0, slash));
    }
  }
  std::string config = dataset.subset.value_or("default");
  if (!dataset.subset && configs.count(config) == 0 && configs.size() == 1) config = *configs.begin();
  if (configs.count(config) == 0) {
    if (configs.empty()) return {};
    fail_user("dataset {}: its Parquet conversion has no configuration '{}'; it has: {}. Set `subset`", dataset.path,
              config, join(configs));
  }
  const std::string prefix = config + "/";
  std::vector<std::string> chosen;
  std::set<std::string> splits;
  for (const std::string& file : files) {
    if (!file.starts_with(prefix) || !file.ends_with(".parquet")) continue;
    const std::string rest = file.substr(prefix.size());
    std::string split;
    if (const size_t slash = rest.find('/'); slash != std::string::npos) {
      split = rest.substr(0, slash);  // <split>/0000.parquet or partial-<split>/0000.parquet
      if (split.starts_with("partial-")) split = split.substr(8);
    } else {
      // <name>-<split>.parquet or <name>-<split>-00000-of-00002.parquet
      std::string stem = rest.substr(0, rest.size() - 8);
      if (const size_t of = stem.rfind("-of-"); of != std::string::npos && of >= 6) stem = stem.substr(0, of - 6);
      if (const size_t dash = stem.rfind('-'); dash != std::string::npos) split = stem.substr(dash + 1);
    }
    splits.insert(split);
    if (split == dataset.split) chosen.push_back(file);
  }
  if (chosen.empty()) {
    fail_user("dataset {}: its Parquet conversion (configuration '{}') has no split '{}'; it has: {}. Set `split`",
              dataset.path, config, dataset.split, join(splits));
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

std::optional<std::vector<fs::path>> fetch_hub_dataset_files(const DatasetConfig& dataset) {
  const io::HubRepo repo = io::parse_repo_spec(dataset.path, io::RepoType::Dataset);
  const std::optional<io::HubFileList> listing = io::list_hub_files(repo.id, io::RepoType::Dataset, repo.revision);
  if (!listing) return std::nullopt;
  std::optional<std::string> readme;
  if (std::find(listing->files.begin(), listing->files.end(), "README.md") != listing->files.end()) {
    const std::vector<fs::path> local = download(repo, repo.revision, {"README.md"});
    std::ifstream stream(local.front());
    std::stringstream text;
    text << stream.rdbuf();
    readme = text.str();
  }
  std::vector<std::string> chosen = choose_hub_dataset_files(dataset, listing->files, readme);
  if (!chosen.empty()) return download(repo, repo.revision, chosen);

  // Nothing Surogate reads on this branch: the hub's Parquet conversion, when it has one.
  std::set<std::string> kinds;
  for (const std::string& file : listing->files) {
    if (hidden(file) || file == "README.md") continue;
    const std::string extension = fs::path(file).extension().string();
    kinds.insert(extension.empty() ? fs::path(file).filename().string() : extension);
  }
  const std::string none = fmt::format(
      "dataset {} has no file Surogate reads (.jsonl, .json, .txt, .parquet){}", dataset.path,
      kinds.empty() ? std::string() : fmt::format("; it has {}", join(kinds)));
  std::optional<io::HubFileList> converted;
  try {
    converted = io::list_hub_files(repo.id, io::RepoType::Dataset, kParquetBranch);
  } catch (const UserError&) {
    fail_user("{}, and no Parquet conversion on the hub ({}); convert it to Parquet or JSON Lines and give a local "
              "path", none, kParquetBranch);
  }
  if (!converted) return std::nullopt;
  chosen = choose_converted_parquet_files(dataset, converted->files);
  if (chosen.empty()) fail_user("{}, and its Parquet conversion ({}) is empty", none, kParquetBranch);
  return download(repo, kParquetBranch, chosen);
}

}  // namespace surogate::data
