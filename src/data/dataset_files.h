// Which files a dataset entry reads (`path`, `subset`, `split`):
//   - a local file: that file; `split` and `subset` do not apply to a single file.
//   - a hub dataset "org/name": the files data/hub_dataset.h chooses for `subset` / `split`,
//     downloaded into the HF cache (offline: its cached snapshot, read as a folder below).
//   - a local folder: `subset` selects the sub-folder of that name; then every supported
//     file below it (.jsonl .ndjson .json .txt .parquet; hidden files skipped) in sorted path
//     order. `split` keeps the files whose name starts with the split followed by '-' or '.'
//     (train.jsonl, train-00000-of-00002.parquet) or that sit in a folder named after
//     the split (train/part0.jsonl). When no file names any split (train, test, validation,
//     valid, dev, eval), the folder is unsplit and all its files are used. When files name
//     other splits but not this one, that is an error listing the splits found.
//   - s3://bucket/key, gs://bucket/key: the object, or the data files under the prefix, fetched
//     into the local cache (io/object_store.h), then as a local file or folder.
//   - anything else is an error.
#pragma once

#include <filesystem>
#include <vector>

#include "config/config.h"

namespace surogate::data {

std::vector<std::filesystem::path> select_dataset_files(const DatasetConfig& dataset);

// The split rule above for paths relative to the dataset's root (sorted): those naming `split`;
// all of them when none names any known split; else a UserError naming `dataset_name` and listing
// the splits there are.
std::vector<std::filesystem::path> choose_split_files(const std::vector<std::filesystem::path>& relative,
                                                      const std::string& split, const std::string& dataset_name);
bool path_names_split(const std::filesystem::path& relative, const std::string& split);

}  // namespace surogate::data
