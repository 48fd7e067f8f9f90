// An exclusive lock on a folder, held by one process for as long as it lives: two `surogate sft`
// runs pointed at one output_dir used to both finish "successfully" while sharing one log file,
// deleting each other's checkpoints (save_total_limit) and overwriting each other's model.
//
// The lock is the kernel's flock on `<folder>/.surogate.lock`. The file records the holder (pid,
// host, start time, command) for the message the next run prints; the lock itself is released by
// the kernel when the holding process ends, however it ends (kill -9 and a power cut included), so
// a lock left by a dead run is never in the way: there is nothing to clear by hand. On a
// filesystem without flock (some network mounts answer ENOLCK), the record alone decides: held by
// a live process of this machine, or by another machine, it refuses; a record whose process is gone
// is stale and taken over; the file is removed when its holder finishes.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace surogate::io {

inline constexpr const char* kFolderLockFile = ".surogate.lock";

class FolderLock {
 public:
  // Takes the lock on `folder` (created when missing) or throws a UserError naming `option`
  // (the option that chose the folder, e.g. "output_dir"), the folder and the holder. This
  // process's command line is recorded for the next run's message ("surogate sft run.yaml").
  static FolderLock acquire(const std::filesystem::path& folder, std::string_view option);

  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&& other) = delete;
  FolderLock(const FolderLock&) = delete;
  ~FolderLock();

 private:
  FolderLock(int fd, std::filesystem::path file, bool record_only) : fd_(fd), file_(std::move(file)), record_only_(record_only) {}
  int fd_ = -1;
  std::filesystem::path file_;
  bool record_only_ = false;  // no flock here: the record is the lock, removed on release
};

}  // namespace surogate::io
