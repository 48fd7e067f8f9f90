// See run_folder_lock.h.
#include "train/run_folder_lock.h"

#include <filesystem>

namespace surogate::train {

std::vector<io::FolderLock> lock_run_folders(const Config& config) {
  std::vector<io::FolderLock> locks;
  locks.push_back(io::FolderLock::acquire(config.run.output_dir, "output_dir"));
  if (config.checkpoint.checkpoint_dir) {
    std::error_code error;
    if (!std::filesystem::exists(*config.checkpoint.checkpoint_dir, error) ||
        !std::filesystem::equivalent(*config.checkpoint.checkpoint_dir, config.run.output_dir, error)) {
      locks.push_back(io::FolderLock::acquire(*config.checkpoint.checkpoint_dir, "checkpoint_dir"));
    }
  }
  return locks;
}

}  // namespace surogate::train
