// The folders a training run writes, locked for the run (io/folder_lock.h): output_dir, and
// checkpoint_dir when it is set to another folder. Taken by the process that writes them (rank
// 0's; the restart supervisor for all its attempts) before anything is tokenized or written, so a
// second run aimed at the same folder stops at once with exit code 2, naming the folder and the
// run that holds it.
#pragma once

#include <vector>

#include "config/sections/checkpoint.h"
#include "config/sections/run.h"
#include "io/folder_lock.h"

namespace surogate::train {

std::vector<io::FolderLock> lock_run_folders(const config::Run& run, const config::Checkpoint& checkpoint);

}  // namespace surogate::train
