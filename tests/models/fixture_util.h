// Shared by the whole-model tests: a parity fixture of scripts/make_hf_fixtures.py (config, the
// batch transformers saw, its results), and the steps every test repeats to run the decoder
// graph on it (input bindings, loading the fixture's HF weights into a CPU backend).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "models/model_spec.h"
#include "models/weight_io.h"
#include "runtime/cpu_backend.h"

namespace surogate::models::testing {

inline std::filesystem::path fixture_dir(const std::string& name) {
  return std::filesystem::path(SUROGATE_FIXTURES_DIR) / name;
}

struct Fixture {
  io::ModelConfig config;
  io::SafetensorsFile expected;
  std::vector<int32_t> input_ids, position_ids, document_ids, targets;
  int64_t batch = 0, sequence = 0;

  int64_t scored_tokens() const {
    return std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t != -100; });
  }
};

// max |actual − expected| / max |expected|: the error relative to the tensor's scale.
inline double scaled_max_error(std::span<const float> actual, std::span<const float> expected) {
  EXPECT_EQ(actual.size(), expected.size());
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < std::min(actual.size(), expected.size()); ++i) {
    diff = std::max(diff, std::abs(double(actual[i]) - double(expected[i])));
    scale = std::max(scale, std::abs(double(expected[i])));
  }
  return diff / std::max(scale, 1e-30);
}

inline std::vector<int32_t> read_ints(const io::SafetensorsFile& file, const std::string& name) {
  const io::SafetensorsTensor& tensor = file.tensor(name);
  EXPECT_EQ(tensor.dtype, DType::I32) << name;
  std::vector<int32_t> out(static_cast<size_t>(tensor.element_count()));
  std::memcpy(out.data(), tensor.bytes.data(), tensor.bytes.size());
  return out;
}

inline Fixture open_fixture(const std::string& name) {
  const std::filesystem::path dir = fixture_dir(name);
  Fixture fixture{io::load_model_config(dir), io::SafetensorsFile::open(dir / "expected.safetensors")};
  fixture.input_ids = read_ints(fixture.expected, "input_ids");
  fixture.position_ids = read_ints(fixture.expected, "position_ids");
  fixture.document_ids = read_ints(fixture.expected, "document_ids");
  fixture.targets = read_ints(fixture.expected, "targets");
  fixture.batch = fixture.expected.tensor("input_ids").shape[0];
  fixture.sequence = fixture.expected.tensor("input_ids").shape[1];
  return fixture;
}

inline std::vector<runtime::InputBinding> bindings(const compiler::ExecutionPlan& plan, const Fixture& fixture) {
  return {{plan.tensor("input_ids"), std::as_bytes(std::span<const int32_t>(fixture.input_ids))},
          {plan.tensor("position_ids"), std::as_bytes(std::span<const int32_t>(fixture.position_ids))},
          {plan.tensor("document_ids"), std::as_bytes(std::span<const int32_t>(fixture.document_ids))},
          {plan.tensor("targets"), std::as_bytes(std::span<const int32_t>(fixture.targets))}};
}

// Loads the fixture's HF weights and writes `loss_scale`.
inline void load_weights(runtime::CpuBackend& backend, const compiler::ExecutionPlan& plan, const std::string& name,
                         const io::ModelConfig& config, float loss_scale) {
  std::vector<ParameterSpec> specs = parameter_specs(config);
  load_hf_weights(fixture_dir(name), specs, [&](const ParameterSpec& spec, const io::SafetensorsTensor& tensor) {
    backend.write_converted(plan.tensor(spec.name), tensor.dtype, tensor.bytes);
  });
  backend.write(plan.tensor("loss_scale"), std::as_bytes(std::span<const float>(&loss_scale, 1)));
}

}  // namespace surogate::models::testing
