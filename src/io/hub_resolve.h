// The public entry point for "give me the local folder of this hub repo": a model or dataset
// repo id plus revision → its snapshot folder in the standard Hugging Face cache, downloading
// what is missing. Same environment (HF_HUB_CACHE / HF_HOME / HF_ENDPOINT / HF_TOKEN /
// HF_HUB_OFFLINE), cache layout, resume and verification as resolve_model / resolve_dataset in
// io/hf_hub.h, which are the "local path or hub id" front doors built on it. See docs/hub.md.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "io/hf_hub.h"  // RepoType

namespace surogate::io {

// `repo_id` is "org/name" (or a bare "name"); `revision` a branch, tag or 40-hex commit.
// A revision may instead be written into the id as "org/name@revision" (then `revision` must be
// left at "main" or be the same). `file_patterns` (glob patterns on repo paths, `*` also matches
// '/', e.g. "data/train-*.parquet") restricts which files are fetched; empty means every file of
// a dataset, and for a model the files Surogate uses (config, tokenizer, safetensors weights).
// Returns <cache>/<models|datasets>--org--name/snapshots/<commit>.
// Online: resolves the revision to a commit, fetches missing files, writes refs/<revision> last.
// HF_HUB_OFFLINE=1 or an unreachable hub: the cached snapshot of the revision, or a UserError
// saying the repo is not cached and to pass a local path (or run `surogate download` online).
// Other failures (404, gated repo without HF_TOKEN, bad revision, corrupt download) are
// UserErrors naming the repo and what to do.
std::filesystem::path resolve_hub_snapshot(const std::string& repo_id, RepoType type,
                                           const std::string& revision = "main",
                                           const std::vector<std::string>& file_patterns = {});

// The files of a repo at a revision without downloading any: the commit and every repo path, so a
// caller can choose what to fetch (data/hub_dataset.h picks a dataset's subset / split).
// nullopt when HF_HUB_OFFLINE is set or the hub cannot be reached (the caller uses the cache);
// other failures are UserErrors as for resolve_hub_snapshot.
struct HubFileList {
  std::string commit;
  std::vector<std::string> files;
};
std::optional<HubFileList> list_hub_files(const std::string& repo_id, RepoType type, const std::string& revision);

}  // namespace surogate::io
