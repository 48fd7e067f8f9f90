// Stage boundaries; see pipeline_stages.h.
#include "distributed/pipeline_stages.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::distributed {

int64_t layer_of(const std::string& name) {
  constexpr std::string_view prefix = "layers.";
  if (!name.starts_with(prefix)) return -1;
  int64_t layer = -1;
  const char* begin = name.data() + prefix.size();
  const char* end = name.data() + name.size();
  auto [next, error] = std::from_chars(begin, end, layer);
  if (error != std::errc() || next == begin || (next != end && *next != '.')) return -1;
  return layer;
}

LayerCosts layer_costs(const graph::Graph& forward, int64_t layers) {
  LayerCosts costs;
  costs.layers.assign(static_cast<size_t>(layers), 0.0);
  std::set<graph::TensorId> counted;
  bool seen_layer = false;
  for (const graph::Node& node : forward.nodes) {
    const int64_t layer = layer_of(node.name);
    seen_layer = seen_layer || layer >= 0;
    double& cost = layer >= 0 && layer < layers ? costs.layers[static_cast<size_t>(layer)]
                   : seen_layer                  ? costs.after
                                                 : costs.before;
    for (graph::TensorId input : node.inputs) {
      const graph::TensorInfo& info = forward.tensor(input);
      if (info.role != graph::TensorRole::Parameter && info.role != graph::TensorRole::Constant) continue;
      if (counted.insert(input).second) cost += static_cast<double>(info.type.size_bytes());
    }
    for (graph::TensorId output : node.outputs) cost += static_cast<double>(forward.tensor(output).type.size_bytes());
  }
  return costs;
}

std::vector<StageLayers> balance_stages(const LayerCosts& costs, int stages) {
  const auto layers = static_cast<int64_t>(costs.layers.size());
  SUROGATE_CHECK(stages >= 1 && layers >= stages, "{} layers split into {} stages", layers, stages);
  std::vector<double> prefix(static_cast<size_t>(layers) + 1, 0.0);
  for (int64_t i = 0; i < layers; ++i) prefix[static_cast<size_t>(i) + 1] = prefix[static_cast<size_t>(i)] + costs.layers[static_cast<size_t>(i)];
  auto cost_of = [&](int stage, int64_t first, int64_t end) {
    double cost = prefix[static_cast<size_t>(end)] - prefix[static_cast<size_t>(first)];
    if (stage == 0) cost += costs.before;
    if (stage == stages - 1) cost += costs.after;
    return cost;
  };
  // best[s][i]: the smallest largest-stage cost of layers [0, i) in stages [0, s]. Of the split
  // points that reach it the earliest is kept, so on ties the later stages take the extra layers.
  const double infinity = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(static_cast<size_t>(stages), std::vector<double>(static_cast<size_t>(layers) + 1, infinity));
  std::vector<std::vector<int64_t>> split(static_cast<size_t>(stages), std::vector<int64_t>(static_cast<size_t>(layers) + 1, 0));
  for (int64_t end = 1; end <= layers; ++end) best[0][static_cast<size_t>(end)] = cost_of(0, 0, end);
  for (int stage = 1; stage < stages; ++stage) {
    for (int64_t end = stage + 1; end <= layers; ++end) {
      for (int64_t first = stage; first < end; ++first) {
        const double candidate = std::max(best[static_cast<size_t>(stage) - 1][static_cast<size_t>(first)], cost_of(stage, first, end));
        if (candidate < best[static_cast<size_t>(stage)][static_cast<size_t>(end)]) {
          best[static_cast<size_t>(stage)][static_cast<size_t>(end)] = candidate;
          split[static_cast<size_t>(stage)][static_cast<size_t>(end)] = first;
        }
      }
    }
  }
  std::vector<StageLayers> result(static_cast<size_t>(stages));
  int64_t end = layers;
  for (int stage = stages - 1; stage >= 0; --stage) {
    const int64_t first = stage == 0 ? 0 : split[static_cast<size_t>(stage)][static_cast<size_t>(end)];
    result[static_cast<size_t>(stage)] = {first, end};
    end = first;
  }
  return result;
}

std::vector<StageLayers> choose_stages(const config::Parallel& parallel, const ConfigSources& sources,
                                       const LayerCosts& costs) {
  const auto layers = static_cast<int64_t>(costs.layers.size());
  const int stages = static_cast<int>(parallel.pipeline_parallel_size);
  if (layers < stages) {
    fail_user("{}: pipeline_parallel_size: {} needs at least one layer per stage, but the model has {} layers; set it "
              "to at most {}", sources.of("pipeline_parallel_size"), stages, layers, layers);
  }
  if (parallel.pipeline_stage_layers.empty()) return balance_stages(costs, stages);
  const int64_t listed =
      std::accumulate(parallel.pipeline_stage_layers.begin(), parallel.pipeline_stage_layers.end(), int64_t{0});
  if (listed != layers) {
    fail_user("{}: pipeline_stage_layers gives the stages {} layers in all ({}), but the model has {}; make them add up "
              "to {}, or leave the option unset to balance the stages by cost",
              sources.of("pipeline_stage_layers"), listed, fmt::join(parallel.pipeline_stage_layers, " + "), layers,
              layers);
  }
  std::vector<StageLayers> result;
  int64_t first = 0;
  for (int64_t count : parallel.pipeline_stage_layers) {
    result.push_back({first, first + count});
    first += count;
  }
  return result;
}

std::string describe_stages(std::span<const StageLayers> stages) {
  std::vector<std::string> parts;
  for (const StageLayers& stage : stages) {
    parts.push_back(stage.count() == 1 ? fmt::format("{}", stage.first) : fmt::format("{}–{}", stage.first, stage.end - 1));
  }
  return fmt::format("layers {}", fmt::join(parts, " | "));
}

}  // namespace surogate::distributed
