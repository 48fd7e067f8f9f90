// Memory planning for a scheduled graph (node order = execution order). Liveness gives each
// arena tensor an interval of steps [first, last]; offsets in one activation arena are then
// assigned ahead of time, greedily by size (largest first), each tensor going to the best-fitting
// gap among the already placed tensors whose intervals overlap its own (256-byte aligned).
// Parameters and constants live in a separate persistent region, parameter gradients in another,
// graph inputs (the batch) in a third, so a batch written once can be executed again; optimizer
// state belongs to the optimizer and is only counted in the breakdown. Host-resident tensors (the
// copies offload_residual makes, compiler/residual_offload.h) get a fifth region, in host memory,
// one after another (each is live from its offload to its fetch, so reuse would save little).
//
// Intervals: a tensor is live from the step that writes it to the last step that reads it.
// Graph outputs stay live until the end (read by the caller after the last step). Intervals are
// closed, so a node's outputs never share memory with its inputs. An asynchronous step (a host
// copy a backend may run beside the steps that follow it) still reads its arena inputs until the
// step it must be complete by: they stay live until just before that step.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace surogate::compiler {

enum class Storage : uint8_t { Arena, Parameters, Gradients, Inputs, Host };

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
  size_t host_bytes = 0;        // the host-resident tensors (offload_residual)
};

// What a pass that moves tensors to host memory (compiler/residual_offload.h) tells the planner:
// the tensors that live in host memory, and the asynchronous steps (the copies) with the step
// each must be complete by. Empty for plans without offloading.
struct HostTransfers {
  std::vector<graph::TensorId> host_tensors;
  std::map<graph::NodeId, graph::NodeId> complete_by;  // asynchronous step -> the step it completes before
};

MemoryPlan plan_memory(const graph::Graph& graph, size_t alignment = 256, const HostTransfers& transfers = {});

size_t align_up(size_t bytes, size_t alignment);

}  // namespace surogate::compiler
