// The Qwen2.5-VL vision tower and the whole vision-language model (models/vision_tower.h,
// vision_model.h) on the CUDA backend in bf16 against the CPU backend in fp32, on the committed
// fixtures tests/fixtures/vision/tower and vision/vl (windows of 4, 2 and 1 merged patches, a
// full-attention block, head dim 8 in the tower and 12 in the text model; two rows with three
// images). Both backends get the same values: the fixture's weights, pixel values and projection
// rounded to bf16 once. The tower's bidirectional attention runs the CUDA attention paths: each
// the process may choose (SUROGATE_ATTENTION's auto and surogate) is run. (Quick GELU, Qwen2-VL's,
// is not in this tower; runtime_cuda_tests checks its kernel.)
//
// Tolerances are the decoder comparisons' (test_decoder_cuda.cpp, which says why):
//   loss (the model's):                 |cuda − cpu| / |cpu| < 1e-2
//   features, every weight's gradient:  max |cuda − cpu| / max |cpu| < 5e-2, per tensor
//   the tower's gradients in the whole model: < 1e-1. Their chain is the decoder's backward, the
//   splice and the merger before the tower's own (twice the roundings of the tower alone, whose
//   worst tensor measured 2.3e-2 on an H200); the worst is a bias gradient, a sum over patches
//   whose terms cancel (7.8e-2 measured, 2026-11-29). A wrong kernel gives errors of order 1.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cuda/device_info.h"
#include "models/fixture_util.h"
#include "models/vision_model_run.h"
#include "runtime_cuda/vision_cuda_util.h"
#include "runtime/cuda_attention_path.h"
#include "runtime/cuda_backend.h"
#include "runtime/cuda_op_table.h"

namespace surogate::models {
namespace {

constexpr double kLossTolerance = 1e-2;
constexpr double kTensorTolerance = 5e-2;
constexpr double kTowerInModelTolerance = 1e-1;

using testing::vision_fixture;
const testing::RunPrecision& kCpu = testing::kVisionCpu;
const testing::RunPrecision& kCuda = testing::kVisionCuda;

// `tower_tolerance` bounds the gradients of the tower's tensors (names holding "visual."), the
// others kTensorTolerance.
void expect_gradients_match(const std::map<std::string, std::vector<float>>& got,
                            const std::map<std::string, std::vector<float>>& want,
                            double tower_tolerance = kTensorTolerance) {
  testing::expect_gradients_match(got, want, kTensorTolerance, tower_tolerance);
}

// Runs `body` once per attention backend choice, the process-wide settings restored after.
template <typename Body>
void for_each_attention_backend(Body body) {
  const runtime::AttentionSettings saved = runtime::attention_settings();
  for (const runtime::AttentionBackend backend : {runtime::AttentionBackend::Auto, runtime::AttentionBackend::Surogate}) {
    runtime::AttentionSettings settings = saved;
    settings.backend = backend;
    runtime::set_attention_settings(settings);
    SCOPED_TRACE(backend == runtime::AttentionBackend::Auto ? "attention auto" : "attention surogate");
    body();
  }
  runtime::set_attention_settings(saved);
}

// Every op of the tower's and the model's bf16 training plans has a CUDA binder (no GPU needed).
TEST(VisionOnCudaCoverage, EveryOpOfTheTrainingPlansHasACudaBinder) {
  const graph::OpRegistry registry = ops::make_model_registry();
  const VisionModelConfig config = VisionModelConfig::from_folder(vision_fixture("vl"));
  const int64_t patches = 4 * 32;  // any count of whole merge units
  for (const compiler::ExecutionPlan& plan : {testing::vision_tower_plan(config.vision, registry, patches, DType::BF16),
                                              testing::vision_model_plan(config, registry, 2, 48, patches, DType::BF16)}) {
    for (const graph::Node& node : plan.graph.nodes) {
      EXPECT_NE(runtime::builtin_cuda_ops().find(node.op), nullptr) << node.op << " has no CUDA binder";
    }
  }
}

class VisionOnCuda : public ::testing::Test {
protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  }
};

TEST_F(VisionOnCuda, TowerFeaturesAndGradientsMatchCpu) {
  const std::filesystem::path dir = vision_fixture("tower");
  const VisionTowerConfig config = VisionTowerConfig::from_config_json(dir / "config.json");
  const io::SafetensorsFile expected = io::SafetensorsFile::open(dir / "expected.safetensors");
  const std::vector<int32_t> flat = testing::read_ints(expected, "grid_thw");
  std::vector<std::array<int64_t, 3>> grids;
  for (size_t i = 0; i + 2 < flat.size(); i += 3) grids.push_back({flat[i], flat[i + 1], flat[i + 2]});
  const std::vector<float> pixel_values = io::read_tensor_as_float32(expected.tensor("pixel_values"));
  const std::vector<float> projection = io::read_tensor_as_float32(expected.tensor("projection"));

  runtime::CpuBackend cpu;
  const testing::VisionTowerRun want = testing::run_vision_tower(dir, config, grids, pixel_values, projection, cpu, kCpu);
  for_each_attention_backend([&] {
    runtime::CudaBackend gpu;
    const testing::VisionTowerRun got =
        testing::run_vision_tower(dir, config, grids, pixel_values, projection, gpu, kCuda);
    const double error = testing::scaled_max_error(got.features, want.features);
    std::printf("[ measured ] tower features error %.2e\n", error);
    EXPECT_LT(error, kTensorTolerance) << "features";
    expect_gradients_match(got.gradients, want.gradients);
  });
}

TEST_F(VisionOnCuda, ModelLossAndGradientsMatchCpu) {
  const std::filesystem::path dir = vision_fixture("vl");
  const VisionModelConfig config = VisionModelConfig::from_folder(dir);
  const io::SafetensorsFile expected = io::SafetensorsFile::open(dir / "expected.safetensors");
  runtime::CpuBackend cpu;
  const testing::VisionModelRun want = testing::run_vision_model(dir, config, expected, cpu, kCpu);
  for_each_attention_backend([&] {
    runtime::CudaBackend gpu;
    const testing::VisionModelRun got = testing::run_vision_model(dir, config, expected, gpu, kCuda);
    const double error = std::abs(double(got.loss) - want.loss) / std::abs(double(want.loss));
    std::printf("[ measured ] vl loss cuda %.6f cpu %.6f rel %.2e\n", got.loss, want.loss, error);
    EXPECT_LT(error, kLossTolerance);
    expect_gradients_match(got.gradients, want.gradients, kTowerInModelTolerance);
  });
}

}  // namespace
}  // namespace surogate::models
