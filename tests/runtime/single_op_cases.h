// The registry of single-op cases: for every registered op (graph::register_core_ops +
// ops::register_model_ops), the inputs one node of it is run on alone — types as the CUDA backend
// runs them (BF16 for the model ops; the CPU backend gets the same values in F32), attrs, and how
// each input's values are built (uniform random by default; indices, routing tables, positions
// and seeds by named builders) — or, for an op that cannot be exercised alone, the reason.
// Used by tests/runtime/test_op_coverage.cpp (CPU: every op declares a tolerance and is covered or
// listed; every case runs on the CPU backend) and tests/runtime_cuda/test_every_op_cuda.cpp (every
// case on the CPU and CUDA backends, compared within the op's declared BackendTolerance).
// A new op fails test_op_coverage until it gets a case here or a line in ops_not_run_alone().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/graph.h"

namespace surogate::testing {

// Values of one input, as doubles (integers for I32 inputs), for `count` elements.
using InputValues = std::function<std::vector<double>(size_t count, std::mt19937& random)>;

struct SingleOpCase {
  std::string op;
  std::vector<graph::TensorType> inputs;  // as the CUDA backend runs them
  nlohmann::json attrs = nlohmann::json::object();
  std::vector<InputValues> values = {};   // per input; missing or empty: uniform in [-1, 1]
  // Outputs whose values are backend-private (a saved statistic one backend does not write), not
  // compared; each such case says why.
  std::vector<size_t> unchecked_outputs = {};
};

const std::vector<SingleOpCase>& single_op_cases();

// Op name -> why it is not run alone here (and which test covers it).
const std::map<std::string, std::string>& ops_not_run_alone();

}  // namespace surogate::testing
