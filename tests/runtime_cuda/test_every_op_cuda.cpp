// Every registered op alone on the CPU and CUDA backends, compared (ggml's test-backend-ops is the
// model). The cases and the ops not run alone are tests/runtime/single_op_cases.cpp; the bound is
// the op's own declared graph::BackendTolerance, per dtype of the output on CUDA:
//   max_i |cuda_i − cpu_i| / max_i |cpu_i|  ≤  tolerance  (integer outputs: equal; non-finite: fail)
// Both backends get the same values (bf16-exact where the CUDA input is BF16); the CPU runs them in
// F32. Backward kernels are covered as ops of their own (rmsnorm_backward, linear_backward_weight,
// attention_backward, ...): every gradient rule emits registered ops, each of which has a case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "cuda/test_helpers.h"
#include "runtime/cpu_backend.h"
#include "runtime/cuda_backend.h"
#include "runtime/cuda_op_table.h"
#include "runtime/single_op_cases.h"
#include "runtime/single_op_run.h"

namespace surogate::testing {
namespace {

// Every op the CUDA table binds is a registered op with a case, or listed with its reason; every
// case's op has a CUDA binder.
TEST(EveryOpCudaCoverage, TheCudaTableAndTheCasesAgree) {
  std::set<std::string> covered;
  for (const SingleOpCase& c : single_op_cases()) covered.insert(c.op);
  for (const std::string& name : runtime::builtin_cuda_ops().names()) {
    EXPECT_TRUE(covered.contains(name) || ops_not_run_alone().contains(name))
        << name << " has a CUDA binder but no single-op case or reason";
  }
  for (const std::string& name : covered) {
    EXPECT_NE(runtime::builtin_cuda_ops().find(name), nullptr) << name << " has a case but no CUDA binder";
  }
}

double tolerance_for(const graph::OpDef& def, DType dtype) {
  return dtype == DType::F32 ? def.backend_tolerance->f32 : def.backend_tolerance->bf16;
}

class EveryOpCuda : public ::testing::TestWithParam<size_t> {};

TEST_P(EveryOpCuda, MatchesTheCpuBackendWithinTheOpsTolerance) {
  SKIP_WITHOUT_GPU();
  const SingleOpCase& c = single_op_cases()[GetParam()];
  const graph::OpDef& def = single_op_registry().get(c.op);
  ASSERT_TRUE(def.backend_tolerance.has_value()) << c.op;
  runtime::CpuBackend cpu;
  runtime::CudaBackend gpu;
  const uint32_t seed = 1000 + static_cast<uint32_t>(GetParam());
  const SingleOpOutputs expected = run_single_op(c, single_op_registry(), cpu, /*cpu_form=*/true, seed);
  const SingleOpOutputs got = run_single_op(c, single_op_registry(), gpu, /*cpu_form=*/false, seed);
  ASSERT_EQ(got.values.size(), expected.values.size());
  for (size_t o = 0; o < got.values.size(); ++o) {
    const std::string where = c.op + " output " + std::to_string(o) + " (" + graph::format_type(got.types[o]) + ")";
    ASSERT_EQ(got.values[o].size(), expected.values[o].size()) << where;
    if (std::find(c.unchecked_outputs.begin(), c.unchecked_outputs.end(), o) != c.unchecked_outputs.end()) continue;
    if (!dtype_is_floating(got.types[o].dtype)) {
      EXPECT_EQ(got.values[o], expected.values[o]) << where;
      continue;
    }
    double scale = 0.0, worst = 0.0;
    for (size_t i = 0; i < got.values[o].size(); ++i) {
      ASSERT_TRUE(std::isfinite(got.values[o][i])) << where << " element " << i;
      scale = std::max(scale, std::fabs(expected.values[o][i]));
      worst = std::max(worst, std::fabs(got.values[o][i] - expected.values[o][i]));
    }
    const double error = scale > 0.0 ? worst / scale : worst;
    EXPECT_LE(error, tolerance_for(def, got.types[o].dtype)) << where;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryCase, EveryOpCuda, ::testing::Range<size_t>(0, single_op_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return single_op_case_name(info.param); });

}  // namespace
}  // namespace surogate::testing
