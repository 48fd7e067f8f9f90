// See run_folder_lock.h.
#include "train/run_folder_lock.h"

#include <filesystem>

namespace surogate::train {

std::vector<io::FolderLock> lock_run_folders(const config::Run& run, const config::Checkpoint& checkpoint) {
  std::vector<io::FolderLock> locks;
  locks.push_back(io::FolderLock::acquire(run.output_dir, "output_dir"));
  if (checkpoint.checkpoint_dir) {
    std::error_code error;
    if (!std::filesystem::exists(*checkpoint.checkpoint_dir, error) ||
        !std::filesystem::equivalent(*checkpoint.checkpoint_dir, run.output_dir, error)) {
      locks.push_back(io::FolderLock::acquire(*checkpoint.checkpoint_dir, "checkpoint_dir"));
    }
  }
  return locks;
}

}  // namespace surogate::train
