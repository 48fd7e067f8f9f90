// Which layers each pipeline stage runs (pipeline_parallel_size; docs/architecture.md, "Pipeline
// parallel"). Stages are contiguous runs of whole layers, at least one each. Either the user lists
// each stage's layer count (pipeline_stage_layers), or the split balances cost: each layer's cost
// (bytes, from the graph: parameters and the activations its forward writes), the first stage
// also carrying what comes before the layers (the embedding) and the last what comes after (final
// norm, LM head, loss); the split minimises the largest stage's cost (ties: the later stages
// take the extra layers), which is what bounds the memory a stage needs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "config/config_sources.h"
#include "config/sections/parallel.h"
#include "graph/graph.h"

namespace surogate::distributed {

struct StageLayers {
  int64_t first = 0;  // first layer
  int64_t end = 0;    // one past the last
  int64_t count() const { return end - first; }
};

// What the split weighs: one cost per layer, and the parts outside the layers.
struct LayerCosts {
  std::vector<double> layers;
  double before = 0.0;  // nodes before the first layer (the first stage's)
  double after = 0.0;   // nodes after the last layer (the last stage's)
};

// The layer of a node or tensor named "layers.<n>…", or -1.
int64_t layer_of(const std::string& name);

// Each layer's bytes in `forward`: the parameters it reads (a parameter read by several layers, or
// by nodes outside the layers, counts where first read) and the tensors its nodes write.
LayerCosts layer_costs(const graph::Graph& forward, int64_t layers);

// The contiguous split of the layers into `stages` minimising the largest stage cost.
std::vector<StageLayers> balance_stages(const LayerCosts& costs, int stages);

// The split the configuration asks for: pipeline_stage_layers when set (a UserError naming it when
// the counts do not add up to `layers`), else balance_stages. Fewer layers than stages is a
// UserError naming pipeline_parallel_size (where it was set, from `sources`).
std::vector<StageLayers> choose_stages(const config::Parallel& parallel, const ConfigSources& sources,
                                       const LayerCosts& costs);

// "layers 0–13 | 14–27" for messages.
std::string describe_stages(std::span<const StageLayers> stages);

}  // namespace surogate::distributed
