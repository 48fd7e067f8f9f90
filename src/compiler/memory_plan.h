// Memory planning for a scheduled graph (node order = execution order). Liveness gives each
// arena tensor an interval of steps [first, last]; offsets in one activation arena are then
// assigned ahead of time, greedily by size (largest first), each tensor going to the best-fitting
// gap among the already placed tensors whose intervals overlap its own (256-byte aligned).
// Parameters and constants live in a separate persistent region, parameter gradients in another,
// graph inputs (the batch) in a third, so a batch written once can be executed again; optimizer
// state belongs to the optimizer and is only counted in the breakdown.
//
// Intervals: a tensor is live from the step that writes it to the last step that reads it.
// Graph outputs stay live until the end (read by the caller after the last step). Intervals are
// closed, so a node's outputs never share memory with its inputs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace surogate::compiler {

enum class Storage : uint8_t { Arena, Parameters, Gradients, Inputs };

struct TensorPlacement {
  Storage storage = Storage::Arena;
  size_t offset = 0;      // bytes from the start of its storage region
  size_t size_bytes = 0;  // unaligned payload size
  int first_step = 0;     // liveness (arena tensors)
  int last_step = 0;
};

struct MemoryPlan {
  std::vector<TensorPlacement> placements;  // indexed by TensorId
  size_t alignment = 256;
  size_t arena_bytes = 0;       // the activation arena, as planned
  size_t peak_live_bytes = 0;   // the most bytes (aligned) live at one step: the arena's lower bound
  int peak_step = -1;
  size_t parameter_bytes = 0;
  size_t gradient_bytes = 0;
  size_t input_bytes = 0;
};

MemoryPlan plan_memory(const graph::Graph& graph, size_t alignment = 256);

size_t align_up(size_t bytes, size_t alignment);

}  // namespace surogate::compiler
