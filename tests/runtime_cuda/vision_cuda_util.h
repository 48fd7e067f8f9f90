// What the vision-language CUDA comparisons (test_vision_cuda.cpp, test_qwen3_vl_cuda.cpp) share:
// the fixtures' folder, the two precisions, and the per-tensor gradient comparison.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/fixture_util.h"
#include "models/run_precision.h"

namespace surogate::models::testing {

// SUROGATE_FIXTURES_DIR in the environment overrides the build tree's path (as test_decoder_cuda.cpp).
inline std::filesystem::path vision_fixture(const std::string& name) {
  const char* override_dir = std::getenv("SUROGATE_FIXTURES_DIR");
  return std::filesystem::path(override_dir && *override_dir ? override_dir : SUROGATE_FIXTURES_DIR) / "vision" / name;
}

inline const RunPrecision kVisionCpu{DType::F32, true};
inline const RunPrecision kVisionCuda{DType::BF16, true};

// Each gradient of `got` against `want` as max |cuda − cpu| / max |cpu|: below `tower_tolerance`
// for the tower's tensors (names holding "visual."), `tolerance` for the others; prints the worst.
inline void expect_gradients_match(const std::map<std::string, std::vector<float>>& got,
                                   const std::map<std::string, std::vector<float>>& want, double tolerance,
                                   double tower_tolerance) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0.0;
  std::string worst_name;
  for (const auto& [name, expected] : want) {
    const double error = scaled_max_error(got.at(name), expected);
    if (error > worst) worst = error, worst_name = name;
    const bool tower = name.find("visual.") != std::string::npos;
    EXPECT_LT(error, tower ? tower_tolerance : tolerance) << "gradient of " << name;
  }
  std::printf("[ measured ] worst gradient error %.2e (%s)\n", worst, worst_name.c_str());
}

}  // namespace surogate::models::testing
