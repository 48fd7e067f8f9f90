// Checkpoint folders on disk: atomic creation, a manifest of sizes and checksums, discovery of the
// latest checkpoint that verifies, and rotation (save_total_limit).
//
// A checkpoint is written into `checkpoint-<step>.partial` inside the checkpoint folder; every
// file is fsynced and read back in full to record its size and XXH3-64 checksum in the manifest
// `complete.json`, written last; then the folder is renamed to `checkpoint-<step>` and the parent
// fsynced. Killing the process at any moment therefore leaves either the previous checkpoints
// untouched plus a `.partial` folder (ignored and removed on the next save), or a complete new
// checkpoint. A folder without a valid manifest, or whose files do not match it, is never chosen
// for resuming: `latest_verified` re-reads the files and skips such a folder with a warning that
// names it. Rotation and replacement rename a checkpoint to `checkpoint-<step>.deleting` before
// removing it, so a kill during a removal never leaves a half-deleted `checkpoint-<step>` behind.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace surogate::train {

class CheckpointStore {
public:
  CheckpointStore(std::filesystem::path root, int total_limit);

  // Writes a checkpoint for `step`: `write_files` fills the (temporary) folder it is given.
  // Returns the final folder. Older complete checkpoints beyond the limit are deleted afterwards.
  // Safe to call from a writer thread while the trainer reads the folder list.
  std::filesystem::path save(int64_t step, const std::function<void(const std::filesystem::path&)>& write_files);

  // Complete checkpoints (manifest present, every file of its size), oldest first.
  std::vector<std::filesystem::path> complete_checkpoints() const;
  std::optional<std::filesystem::path> latest() const;
  // The newest checkpoint whose files match their manifest's sizes and checksums. Every newer
  // `checkpoint-<step>` folder that does not is reported through `warn` (one line naming the
  // folder and what is wrong with it) and skipped.
  std::optional<std::filesystem::path> latest_verified(const std::function<void(const std::string&)>& warn) const;

  static std::optional<int64_t> step_of(const std::filesystem::path& checkpoint);
  // True when the manifest exists and every listed file exists with its recorded size.
  static bool is_complete(const std::filesystem::path& checkpoint);
  // Empty when every file matches its recorded size and checksum; else what does not.
  static std::string verification_problem(const std::filesystem::path& checkpoint);

private:
  void remove_stale_partials() const;
  void rotate() const;

  std::filesystem::path root_;
  int total_limit_;
};

// XXH3-64 of a file's whole contents, as 16 lowercase hex digits; throws UserError naming the path.
std::string file_checksum(const std::filesystem::path& path);

// Flushes a file's (or a folder's) contents to disk; throws UserError naming the path on failure.
void fsync_path(const std::filesystem::path& path);

// Writes `contents` to `path` atomically: a temp file beside it, fsync, rename, fsync folder.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);

}  // namespace surogate::train
