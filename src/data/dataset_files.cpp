// Dataset file selection; see dataset_files.h.
#include "data/dataset_files.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "data/row_reader.h"
#include "data/hub_dataset.h"
#include "io/hf_hub.h"
#include "io/object_store.h"

namespace surogate::data {
namespace {

namespace fs = std::filesystem;

}  // namespace

const char* const kKnownSplits[] = {"train", "test", "validation", "valid", "dev", "eval"};

bool path_names_split(const fs::path& relative, const std::string& split) {
  for (auto it = relative.begin(); it != relative.end(); ++it) {
    if (std::next(it) != relative.end() && it->string() == split) return true;
  }
  std::string name = relative.filename().string();
  if (name.rfind(split, 0) != 0) return false;
  if (name.size() == split.size()) return true;
  char next = name[split.size()];
  return next == '-' || next == '.';
}

std::vector<fs::path> choose_split_files(const std::vector<fs::path>& relative, const std::string& split,
                                         const std::string& dataset_name) {
  std::vector<fs::path> chosen;
  std::set<std::string> splits_seen;
  for (const auto& path : relative) {
    if (path_names_split(path, split)) chosen.push_back(path);
    for (const char* known : kKnownSplits) {
      if (path_names_split(path, known)) splits_seen.insert(known);
    }
  }
  if (!chosen.empty()) return chosen;
  if (!splits_seen.empty()) {
    std::string found;
    for (const auto& name : splits_seen) found += (found.empty() ? "" : ", ") + name;
    fail_user("dataset {}: no file belongs to split '{}'; the dataset has splits: {}. Set `split`", dataset_name,
              split, found);
  }
  return relative;
}

std::vector<fs::path> select_dataset_files(const DatasetConfig& dataset) {
  if (dataset.path.empty()) fail_user("a dataset has no `path`: set it to a local file, folder or hub dataset id");
  fs::path root = dataset.path;
  if (io::is_object_store_url(dataset.path)) {
    // The object, or the data files under the prefix, in the local cache; then as a local path.
    root = io::fetch_object_store_path(dataset.path, [](const std::string& key) { return is_supported_data_file(key); });
  } else if (!fs::exists(root)) {
    if (!io::looks_like_repo_id(dataset.path)) {
      fail_user("dataset path '{}' does not exist and is not a hub dataset id (org/name); check the path",
                dataset.path);
    }
    if (auto files = fetch_hub_dataset_files(dataset)) return *files;
    root = io::resolve_dataset(dataset.path);  // offline or unreachable: the cached snapshot, as a folder
  }
  if (fs::is_regular_file(root)) {
    if (!is_supported_data_file(root)) {
      fail_user("dataset file {} has an unsupported type: use .jsonl, .json, .txt or .parquet", root.string());
    }
    return {root};
  }
  if (dataset.subset) {
    root /= *dataset.subset;
    if (!fs::is_directory(root)) {
      fail_user("dataset {}: subset '{}' is not a folder of the dataset ({} does not exist)", dataset.path,
                *dataset.subset, root.string());
    }
  }
  std::vector<fs::path> all;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    // lexically: fs::relative would resolve hub-cache symlinks into blob names without extensions.
    if (it->is_regular_file() && is_supported_data_file(it->path())) all.push_back(it->path().lexically_relative(root));
  }
  std::sort(all.begin(), all.end());
  if (all.empty()) {
    fail_user("dataset folder {} holds no .jsonl, .json, .txt or .parquet files", root.string());
  }
  std::vector<fs::path> chosen;
  for (const auto& relative : choose_split_files(all, dataset.split, dataset.path)) chosen.push_back(root / relative);
  return chosen;
}

}  // namespace surogate::data
