// Model and dataset acquisition from the Hugging Face Hub into the standard Hugging Face cache,
// so files already fetched by `huggingface_hub` / `transformers` are reused and vice versa.
// A local folder is used as is. A repo id "org/name[@revision]" is resolved to a snapshot
// folder: HF_HUB_CACHE (else HF_HOME/hub, else ~/.cache/huggingface/hub) /
// models--org--name/{blobs, snapshots/<commit>, refs/<revision>}. Downloads are resumable
// (blobs/<etag>.incomplete + HTTP Range) and verified (size; sha256 for LFS files).
// HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE are honoured; see docs/hub.md.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace surogate::io {

enum class RepoType { Model, Dataset };

// A local folder → itself. A repo id → the local snapshot folder holding config.json,
// generation_config.json, tokenizer files and the safetensors weights (+ index); non-empty
// `file_patterns` fetch only those of them that match.
std::filesystem::path resolve_model(const std::string& model_or_path,
                                    const std::vector<std::string>& file_patterns = {});

// A local file or folder → itself. A dataset repo id → its snapshot folder holding the files
// matching `file_patterns` (glob patterns on repo paths, e.g. "data/*.parquet"; empty: all files).
std::filesystem::path resolve_dataset(const std::string& dataset_or_path,
                                      const std::vector<std::string>& file_patterns = {});

// Revision-explicit form for hub ids only: io/hub_resolve.h (resolve_hub_snapshot).

// True when `text` has the shape of a hub id ("org/name" or "name", optional "@revision") and
// is not an existing local path.
bool looks_like_repo_id(const std::string& text);

}  // namespace surogate::io
