// A dataset entry whose `path` is a hub dataset id (`org/name`, optionally `@revision`): which of
// the repo's files its `subset` and `split` read, chosen from the repo's file list before
// anything is downloaded, then fetched into the Hugging Face cache (io/hub_resolve.h: cached,
// resumable, verified). The layouts the `datasets` library reads, in this order:
//   1. README.md's YAML header `configs:` (config_name, data_files as a pattern, a list of patterns,
//      or a list of {split, path}); `subset` names the config (default: the one marked
//      `default: true`, else "default", else the only one); data_files without splits are the
//      "train" split;
//   2. otherwise the data files of the repo (.jsonl .ndjson .json .txt .parquet): `subset` is a
//      top-level folder, and `split` keeps the files named after it as for a local folder
//      (data/train-00000-of-00002.parquet, test.jsonl, train/part.jsonl); files naming no split at
//      all are one unsplit dataset;
//   3. when the main branch has no file Surogate reads (CSV, a loading script), the hub's Parquet
//      conversion on the `refs/convert/parquet` branch: <subset or default>/<split>/NNNN.parquet
//      (also partial-<split>/, and the older <config>/<name>-<split>[-NNNNN-of-NNNNN].parquet).
// Offline (HF_HUB_OFFLINE=1) or with the hub unreachable, the cached snapshot is used as a folder.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace surogate::data {

// The repo paths `dataset` reads among `files` (the repo's list at one revision), or an empty
// list when no file there is a data file Surogate reads. `readme` is README.md's text, if any.
// Throws UserError naming the dataset for a subset or split the repo does not have.
std::vector<std::string> choose_hub_dataset_files(const DatasetConfig& dataset, const std::vector<std::string>& files,
                                                  const std::optional<std::string>& readme);

// The same for the refs/convert/parquet branch's layout.
std::vector<std::string> choose_converted_parquet_files(const DatasetConfig& dataset,
                                                        const std::vector<std::string>& files);

// Lists, chooses and downloads; returns the local files in repo path order. nullopt when the hub
// cannot be asked (HF_HUB_OFFLINE=1, unreachable): the caller reads the cached snapshot instead.
std::optional<std::vector<std::filesystem::path>> fetch_hub_dataset_files(const DatasetConfig& dataset);

}  // namespace surogate::data
