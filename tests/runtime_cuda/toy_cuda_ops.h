// CUDA binders for the toy ops, and a CUDA table holding them plus the core ops: shows that a
// table is extended by an explicit register function, outside src/runtime.
#pragma once

#include "runtime/cuda_op_table.h"

namespace surogate::testing {

void register_toy_cuda_ops(runtime::CudaOpTable& table);
// Core + toy binders.
const runtime::CudaOpTable& toy_cuda_table();

}  // namespace surogate::testing
