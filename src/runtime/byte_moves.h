// The rule every Backend::copy_within enforces before it copies (backend.h): each move inside its
// tensor, no destination overlapping another move's source or destination.
#pragma once

#include <span>

#include "compiler/execution_plan.h"
#include "runtime/backend.h"

namespace surogate::runtime {

// InternalError naming the tensor when a move reaches past its end or a destination overlaps
// another move's source or destination (the copies of one call may then run in any order).
void check_byte_moves(const compiler::ExecutionPlan& plan, std::span<const ByteMove> moves);

}  // namespace surogate::runtime
