// One NCCL group (ncclGroupStart / ncclGroupEnd) on the calling thread: the NCCL calls made
// through this thread's communicators while it is open (point-to-point sends and receives) are
// posted together at close(), and progress independently of each other, so a send and a receive
// that must overlap (the pipeline's exchanges, distributed/pipeline_rounds.h) cannot block one
// another. Compiled only with CUDA.
#pragma once

namespace surogate::distributed {

class NcclGroup {
public:
  NcclGroup();   // ncclGroupStart
  ~NcclGroup();  // ends a group left open (after an exception), ignoring its result
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  // ncclGroupEnd: enqueues the group's calls on their streams; throws with NCCL's reason on failure.
  void close();

private:
  bool open_ = false;
};

}  // namespace surogate::distributed
