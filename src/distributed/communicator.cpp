// What every communicator shares; see communicator.h.
#include "distributed/communicator.h"

#include "core/error.h"

namespace surogate::distributed {

size_t collective_element_bytes(DType dtype) {
  SUROGATE_CHECK(dtype == DType::F32 || dtype == DType::BF16, "collectives take F32 or BF16 buffers");
  return dtype_size_bytes(dtype);
}

}  // namespace surogate::distributed
