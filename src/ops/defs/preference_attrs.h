// The preference_loss op's attributes <-> ops::PreferenceLossOptions (the trainer's preference
// objective writes them, the CPU and CUDA binders read them).
#pragma once

#include <nlohmann/json.hpp>

#include "graph/op_registry.h"
#include "ops/preference_loss.h"

namespace surogate::ops::defs {

nlohmann::json preference_loss_attrs(const PreferenceLossOptions& options);
// A UserError naming the node for an unknown `type`.
PreferenceLossOptions preference_loss_options(const graph::Attrs& attrs);

}  // namespace surogate::ops::defs
