// An NCCL group; see nccl_group.h.
#include "distributed/nccl_group.h"

#include <nccl.h>

#include <stdexcept>

#include <fmt/format.h>

namespace surogate::distributed {

NcclGroup::NcclGroup() {
  const ncclResult_t result = ncclGroupStart();
  if (result != ncclSuccess) throw std::runtime_error(fmt::format("NCCL group start failed: {}", ncclGetErrorString(result)));
  open_ = true;
}

NcclGroup::~NcclGroup() {
  if (open_) ncclGroupEnd();
}

void NcclGroup::close() {
  if (!open_) return;
  open_ = false;
  const ncclResult_t result = ncclGroupEnd();
  if (result != ncclSuccess) throw std::runtime_error(fmt::format("NCCL group failed: {}", ncclGetErrorString(result)));
}

}  // namespace surogate::distributed
