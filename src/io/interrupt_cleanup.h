// Files that must not outlive an interrupted process. A file being written through a temporary
// (io/atomic_file.h) is removed by the writer's destructor on an error, but Ctrl-C or a kill
// ends the process without running destructors: `surogate tokenize` interrupted while writing
// left a 58 MB `.dataset.surotok.tmp.XXXXXX` that nothing removed. A path registered here is
// unlinked by a handler of SIGINT, SIGTERM and SIGHUP, which then lets the signal end the process
// as it would have (the exit status still says "killed by SIGINT"). The handler is installed only
// where the signal still has its default action, so a program that handles the signal itself (the
// restart supervisor, the Python interpreter) keeps its handler and its behaviour.
#pragma once

#include <filesystem>

namespace surogate::io {

// While an InterruptCleanup lives, its path is removed if the process is interrupted. A fixed
// number of paths can be registered at once (64); past that, a path is simply not covered.
class InterruptCleanup {
 public:
  explicit InterruptCleanup(const std::filesystem::path& path);
  ~InterruptCleanup();
  InterruptCleanup(const InterruptCleanup&) = delete;
  InterruptCleanup& operator=(const InterruptCleanup&) = delete;

 private:
  int slot_ = -1;
};

}  // namespace surogate::io
