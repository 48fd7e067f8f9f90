// Checkpoint folders on disk: atomic creation, discovery of the latest complete one, and
// rotation (save_total_limit).
//
// A checkpoint is written into `checkpoint-<step>.partial` inside the checkpoint folder; every
// file is fsynced, a `complete.json` marker (listing the files and their sizes) is written last,
// and the folder is renamed to `checkpoint-<step>` and the parent fsynced. Killing the process
// at any moment therefore leaves either the previous checkpoints untouched plus a `.partial`
// folder (ignored and removed on the next save), or a complete new checkpoint. A folder
// without a valid marker, or whose files don't match it, is never chosen for resuming.
// Rotation and replacement rename a checkpoint to `checkpoint-<step>.deleting` before removing
// it, so a kill during a removal never leaves a half-deleted `checkpoint-<step>` behind.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

namespace surogate::train {

class CheckpointStore {
public:
  CheckpointStore(std::filesystem::path root, int total_limit);

  // Writes a checkpoint for `step`: `write_files` fills the (temporary) folder it is given.
  // Returns the final folder. Older checkpoints beyond the limit are deleted afterwards.
  std::filesystem::path save(int64_t step, const std::function<void(const std::filesystem::path&)>& write_files);

  // Complete checkpoints, oldest first.
  std::vector<std::filesystem::path> complete_checkpoints() const;
  std::optional<std::filesystem::path> latest() const;

  static std::optional<int64_t> step_of(const std::filesystem::path& checkpoint);
  // True when the marker exists and every listed file exists with its recorded size.
  static bool is_complete(const std::filesystem::path& checkpoint);

private:
  void remove_stale_partials() const;
  void rotate() const;

  std::filesystem::path root_;
  int total_limit_;
};

// Flushes a file's (or a folder's) contents to disk; throws UserError naming the path on failure.
void fsync_path(const std::filesystem::path& path);

// Writes `contents` to `path` atomically: a temp file beside it, fsync, rename, fsync folder.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);

}  // namespace surogate::train
