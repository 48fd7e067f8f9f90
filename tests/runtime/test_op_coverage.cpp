// The CPU half of the every-op test (tests/runtime_cuda/test_every_op_cuda.cpp runs the cases on
// both backends): every registered op declares its CUDA-versus-CPU tolerance and has a single-op
// case or a listed reason (so a new op cannot be forgotten), and every case runs on the CPU
// backend with finite outputs (so the GPU run starts from cases that build and execute).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "runtime/cpu_backend.h"
#include "runtime/single_op_cases.h"
#include "runtime/single_op_run.h"

namespace surogate::testing {
namespace {

TEST(OpCoverage, EveryRegisteredOpDeclaresABackendTolerance) {
  for (const std::string& name : single_op_registry().names()) {
    const graph::OpDef& def = single_op_registry().get(name);
    ASSERT_TRUE(def.backend_tolerance.has_value()) << name << ": declare .backend_tolerance on the op";
    EXPECT_GE(def.backend_tolerance->f32, 0.0) << name;
    EXPECT_GE(def.backend_tolerance->bf16, 0.0) << name;
  }
}

TEST(OpCoverage, EveryRegisteredOpHasACaseOrAReason) {
  std::set<std::string> covered;
  for (const SingleOpCase& c : single_op_cases()) covered.insert(c.op);
  const std::vector<std::string> names = single_op_registry().names();
  const std::set<std::string> registered(names.begin(), names.end());
  for (const std::string& name : registered) {
    const bool listed = ops_not_run_alone().contains(name);
    EXPECT_TRUE(covered.contains(name) || listed)
        << name << ": add a case to tests/runtime/single_op_cases.cpp or a reason to ops_not_run_alone()";
    EXPECT_FALSE(covered.contains(name) && listed) << name << " has a case and a reason not to run alone";
  }
  for (const std::string& name : covered) EXPECT_TRUE(registered.contains(name)) << name << " is not registered";
  for (const auto& [name, reason] : ops_not_run_alone()) {
    EXPECT_TRUE(registered.contains(name)) << name << " is not registered";
  }
}

class SingleOpCpu : public ::testing::TestWithParam<size_t> {};

TEST_P(SingleOpCpu, RunsOnTheCpuBackendWithFiniteOutputs) {
  const SingleOpCase& c = single_op_cases()[GetParam()];
  runtime::CpuBackend backend;
  const SingleOpOutputs outputs = run_single_op(c, single_op_registry(), backend, /*cpu_form=*/true, 17);
  ASSERT_FALSE(outputs.values.empty());
  for (size_t o = 0; o < outputs.values.size(); ++o) {
    for (double value : outputs.values[o]) ASSERT_TRUE(std::isfinite(value)) << c.op << " output " << o;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryCase, SingleOpCpu, ::testing::Range<size_t>(0, single_op_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return single_op_case_name(info.param); });

}  // namespace
}  // namespace surogate::testing
