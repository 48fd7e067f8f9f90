// Transitional (issue 40, item 5): the kernels train/device/ launches moved to cuda/kernels/ and
// into namespace surogate::cuda. These aliases keep the device code's old spellings
// (`cuda_kernels::` inside surogate::train, `runtime::cuda_kernels::`) compiling, so the move
// changed only include lines in train/device/ while the device code is being rewritten (item 1).
// When that rewrite lands: spell the calls `cuda::`, drop the includes of this file, delete it.
#pragma once

namespace surogate::cuda {}

namespace surogate::train {
namespace cuda_kernels = ::surogate::cuda;
}  // namespace surogate::train

namespace surogate::runtime {
namespace cuda_kernels = ::surogate::cuda;
}  // namespace surogate::runtime
