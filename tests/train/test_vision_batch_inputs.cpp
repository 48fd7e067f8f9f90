// train/vision_batch_inputs.h: a vision-language PackedBatch turned into the Qwen2.5-VL model
// graph's inputs (tests/fixtures/vision/vl's config: patch 4, merge 2, window 16, image pad 151),
// and into the Qwen3-VL one's (vision/qwen3_vl_model: patch 4, merge 2, image pad 151).
// Two rows of T = 6: row 0 holds a 16 × 8 image (grid 1 × 2 × 4: 8 patches, 2 pads), row 1 an
// 8 × 8 one (4 patches, 1 pad).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "core/error.h"
#include "models/qwen3_vl_model.h"
#include "models/vision_model.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "train/batch_inputs.h"
#include "train/vision_batch_inputs.h"

namespace surogate::train {
namespace {

const std::filesystem::path kModelDir = std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision" / "vl";
constexpr int32_t kPad = 151;

vision::RgbImage image_of(int width, int height, uint8_t seed) {
  vision::RgbImage image{width, height, {}};
  for (int i = 0; i < width * height * 3; ++i) image.pixels.push_back(static_cast<uint8_t>(seed + 7 * i));
  return image;
}

vision::ImageProcessor fixture_processor() {
  vision::ImageProcessorConfig config;
  config.patch_size = 4;
  config.merge_size = 2;
  return vision::ImageProcessor(config);
}

data::PackedBatch two_rows() {
  data::PackedBatch batch;
  batch.batch_size = 2;
  batch.sequence_length = 6;
  batch.input_ids = {5, kPad, kPad, 6, 7, 8, /**/ 9, kPad, 10, 11, 0, 0};
  batch.labels = {-100, -100, -100, 6, 7, 8, /**/ -100, -100, 10, 11, -100, -100};
  batch.position_ids = {0, 1, 2, 3, 4, 5, /**/ 0, 1, 2, 3, 0, 0};
  batch.document_ids = {0, 0, 0, 0, 0, 0, /**/ 1, 1, 1, 1, -1, -1};
  for (int32_t axis = 0; axis < 3; ++axis) {
    for (int32_t t = 0; t < 12; ++t) batch.mrope_position_ids.push_back(axis * 100 + t);
  }
  batch.images = {image_of(16, 8, 1), image_of(8, 8, 2)};
  return batch;
}

TEST(VisionBatchInputs, PixelValuesGridsAndSpliceIndexOfTheRowsImages) {
  const models::VisionModelConfig config = models::VisionModelConfig::from_folder(kModelDir);
  const vision::ImageProcessor processor = fixture_processor();
  const data::PackedBatch batch = two_rows();
  const VisionBatchTensors tensors = vision_batch_tensors(batch, processor, config, "batch 0");
  EXPECT_EQ(tensors.patches, 12);
  EXPECT_EQ(tensors.grid_thw, (std::vector<std::array<int64_t, 3>>{{1, 2, 4}, {1, 2, 2}}));
  EXPECT_EQ(tensors.pixel_values, processor.patches(batch.images).pixel_values);
  EXPECT_EQ(tensors.pixel_values.size(), 12u * 96u);
  // Text token (b, t) reads embedding row b·T + t; the k-th pad of the batch row B·T + k.
  EXPECT_EQ(tensors.splice_index, (std::vector<int32_t>{0, 12, 13, 3, 4, 5, /**/ 6, 14, 8, 9, 10, 11}));
  EXPECT_EQ(tensors.tower.patch_order.size(), 12u);
  EXPECT_EQ(tensors.tower.merged_restore.size(), 3u);
}

TEST(VisionBatchInputs, TextOnlyBatchHasNoPatches) {
  const models::VisionModelConfig config = models::VisionModelConfig::from_folder(kModelDir);
  data::PackedBatch batch = two_rows();
  batch.images.clear();
  std::replace(batch.input_ids.begin(), batch.input_ids.end(), kPad, 3);
  const VisionBatchTensors tensors = vision_batch_tensors(batch, fixture_processor(), config, "batch 0");
  EXPECT_EQ(tensors.patches, 0);
  EXPECT_TRUE(tensors.pixel_values.empty());
  EXPECT_EQ(tensors.splice_index, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
}

std::string error_of(const data::PackedBatch& batch, const vision::ImageProcessor& processor) {
  try {
    vision_batch_tensors(batch, processor, models::VisionModelConfig::from_folder(kModelDir), "batch 3");
  } catch (const UserError& error) {
    return error.what();
  }
  return "";
}

TEST(VisionBatchInputs, MismatchesAreUserErrorsNamingTheBatch) {
  data::PackedBatch missing_pad = two_rows();
  missing_pad.input_ids[7] = 3;  // row 1's pad gone: 2 pads for 3 merged patches
  EXPECT_NE(error_of(missing_pad, fixture_processor()).find("batch 3"), std::string::npos);

  data::PackedBatch no_positions = two_rows();
  no_positions.mrope_position_ids.clear();
  EXPECT_NE(error_of(no_positions, fixture_processor()).find("M-RoPE"), std::string::npos);

  vision::ImageProcessorConfig other;  // patch 14: not the tower's patch 4
  const std::string geometry = error_of(two_rows(), vision::ImageProcessor(other));
  EXPECT_NE(geometry.find("patch_size 14"), std::string::npos) << geometry;
}

// The fixture model's training plan for `batch` (its images padded to `plan_patches` when given),
// the batch's bindings (the batch must outlive them), and a CPU backend holding the fixture's weights.
compiler::ExecutionPlan fixture_plan(const models::VisionModelConfig& config, const graph::OpRegistry& registry,
                                     const data::PackedBatch& batch, int64_t patches, bool train_vision) {
  models::DecoderGraphOptions options;
  options.batch = batch.batch_size;
  options.sequence = batch.sequence_length;
  models::VisionModelGraph model = models::build_vision_model_graph(config, registry, options, patches, train_vision);
  return compiler::compile_training(std::move(model.graph), model.loss, registry);
}

struct FixtureRun {
  FixtureRun(const data::PackedBatch& batch, std::optional<int64_t> plan_patches, bool train_vision)
      : config(models::VisionModelConfig::from_folder(kModelDir)),
        tensors(vision_batch_tensors(batch, fixture_processor(), config, "batch 0", plan_patches)),
        registry(ops::make_model_registry()),
        plan(fixture_plan(config, registry, batch, tensors.patches, train_vision)),
        text(plan),
        bindings(vision_batch_bindings(plan, text.bind(batch, 1.0f / 5), tensors, batch.mrope_position_ids)) {
    backend.load(plan, registry);
    models::load_vision_model_text_weights(kModelDir, config, [&](const models::ParameterSpec& spec, const io::SafetensorsTensor& t) {
      backend.write_converted(plan.tensor(spec.name), t.dtype, t.bytes);
    });
    models::load_vision_tower_weights(kModelDir, config.vision, [&](const models::VisionTowerParameter& p, const io::SafetensorsTensor& t) {
      backend.write_converted(plan.tensor(p.name), t.dtype, t.bytes);
    });
  }
  float execute() {
    backend.zero_gradients();
    backend.execute(bindings);
    float loss = 0;
    backend.read(plan.tensor("loss"), std::as_writable_bytes(std::span<float>(&loss, 1)));
    return loss;
  }

  models::VisionModelConfig config;
  VisionBatchTensors tensors;
  graph::OpRegistry registry;
  compiler::ExecutionPlan plan;
  BatchInputs text;
  std::vector<runtime::InputBinding> bindings;
  runtime::CpuBackend backend;
};

// Every input of a plan built for the batch's patch count is bound once, with its size; the
// plan then runs on the CPU backend with the fixture's weights.
TEST(VisionBatchInputs, BindsEveryInputOfThePlanForItsPatchCount) {
  const data::PackedBatch batch = two_rows();
  FixtureRun run(batch, std::nullopt, /*train_vision=*/false);
  const compiler::ExecutionPlan& plan = run.plan;
  std::map<graph::TensorId, size_t> bound;
  for (const runtime::InputBinding& binding : run.bindings) {
    EXPECT_EQ(bound.count(binding.tensor), 0u) << plan.graph.tensor(binding.tensor).name;
    bound[binding.tensor] = binding.data.size();
  }
  ASSERT_EQ(bound.size(), plan.graph.inputs.size());
  for (graph::TensorId input : plan.graph.inputs) {
    ASSERT_EQ(bound.count(input), 1u) << plan.graph.tensor(input).name;
    EXPECT_EQ(bound[input], plan.graph.tensor(input).type.size_bytes()) << plan.graph.tensor(input).name;
  }
  const float loss = run.execute();
  // Random weights over a vocabulary of 160: the mean cross-entropy is near ln 160 ≈ 5.08.
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_GT(loss, 3.0f);
  EXPECT_LT(loss, 8.0f);
}

// The plan's loss and every parameter's gradient (train_vision: the tower's too), by name.
struct PlanResult {
  float loss = 0;
  std::map<std::string, std::vector<float>> gradients;
};

PlanResult run_padded(const data::PackedBatch& batch, std::optional<int64_t> plan_patches) {
  FixtureRun run(batch, plan_patches, /*train_vision=*/true);
  PlanResult result;
  result.loss = run.execute();
  for (const auto& [parameter, gradient] : run.plan.parameter_gradients) {
    std::vector<float> values(static_cast<size_t>(run.plan.graph.tensor(gradient).type.numel()));
    run.backend.read(gradient, std::as_writable_bytes(std::span<float>(values)));
    result.gradients[run.plan.graph.tensor(parameter).name] = std::move(values);
  }
  return result;
}

// Each gradient of `padded` within 1e-5 of its largest value in `exact` (or of 1e-3 × the model's
// largest, for a gradient that is mathematically zero and only rounding); see the test below.
void expect_same_gradients(const PlanResult& exact, const PlanResult& padded, int64_t plan_patches) {
  ASSERT_EQ(padded.gradients.size(), exact.gradients.size());
  float model_largest = 0;
  for (const auto& [name, values] : exact.gradients) {
    for (float value : values) model_largest = std::max(model_largest, std::abs(value));
  }
  for (const auto& [name, values] : exact.gradients) {
    const std::vector<float>& other = padded.gradients.at(name);
    ASSERT_EQ(other.size(), values.size()) << name;
    float largest = 0, difference = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      largest = std::max(largest, std::abs(values[i]));
      difference = std::max(difference, std::abs(values[i] - other[i]));
    }
    EXPECT_LE(difference, 1e-5f * std::max(largest, 1e-3f * model_largest)) << name << " at " << plan_patches;
  }
}

TEST(VisionBatchInputs, PaddingToThePlansPatchCountChangesNoLossOrGradient) {
  const data::PackedBatch batch = two_rows();
  const PlanResult exact = run_padded(batch, std::nullopt);
  // 8 and 28 padding patches (windows of 4 merged patches: one partial window, then several).
  for (int64_t plan_patches : {20, 40}) {
    const PlanResult padded = run_padded(batch, plan_patches);
    // The padding rows add exact zeros, but the BLAS products over more rows block (and so round)
    // differently: the loss to rel 1e-6, each gradient to 1e-5 of its largest value (measured: 1.5e-6
    // in the tower's weight gradients, the same at both paddings; padding that reached a real patch
    // would differ at O(1)), or of 1e-3 × the model's largest for a gradient that is mathematically
    // zero and only rounding (the k bias: softmax does not change when every score of a query moves
    // by q · b).
    EXPECT_NEAR(padded.loss, exact.loss, 1e-6 * std::abs(exact.loss)) << plan_patches;
    expect_same_gradients(exact, padded, plan_patches);
  }
  // The tower is trained and its gradient is not trivially zero.
  const std::vector<float>& patch_embed = exact.gradients.at("visual.patch_embed.proj.weight");
  EXPECT_TRUE(std::any_of(patch_embed.begin(), patch_embed.end(), [](float value) { return value != 0.0f; }));
}

TEST(VisionBatchInputs, PaddingAddsOneImageOfZerosAfterTheBatchsPatches) {
  const models::VisionModelConfig config = models::VisionModelConfig::from_folder(kModelDir);
  const data::PackedBatch batch = two_rows();
  const VisionBatchTensors tensors = vision_batch_tensors(batch, fixture_processor(), config, "batch 0", 20);
  EXPECT_EQ(tensors.patches, 20);
  EXPECT_EQ(tensors.padding_patches, 8);
  EXPECT_EQ(tensors.grid_thw.size(), 2u);  // the batch's images only
  ASSERT_EQ(tensors.pixel_values.size(), 20u * 96u);
  const std::vector<float> own = fixture_processor().patches(batch.images).pixel_values;
  EXPECT_TRUE(std::equal(own.begin(), own.end(), tensors.pixel_values.begin()));
  EXPECT_TRUE(std::all_of(tensors.pixel_values.begin() + 12 * 96, tensors.pixel_values.end(),
                          [](float value) { return value == 0.0f; }));
  EXPECT_EQ(tensors.tower.patch_order.size(), 20u);
  EXPECT_EQ(tensors.tower.merged_restore.size(), 5u);
  // The splice still reads the batch's 3 merged patches only.
  EXPECT_EQ(tensors.splice_index, (std::vector<int32_t>{0, 12, 13, 3, 4, 5, /**/ 6, 14, 8, 9, 10, 11}));
  // A text-only batch is all padding.
  data::PackedBatch text = two_rows();
  text.images.clear();
  std::replace(text.input_ids.begin(), text.input_ids.end(), kPad, 3);
  EXPECT_EQ(vision_batch_tensors(text, fixture_processor(), config, "batch 0", 20).padding_patches, 20);
}

TEST(VisionBatchInputs, MorePatchesThanThePlanOrPartialMergedPaddingIsRefused) {
  const models::VisionModelConfig config = models::VisionModelConfig::from_folder(kModelDir);
  auto error_at = [&](int64_t plan_patches) -> std::string {
    try {
      vision_batch_tensors(two_rows(), fixture_processor(), config, "batch 7", plan_patches);
    } catch (const UserError& error) {
      return error.what();
    }
    return "";
  };
  const std::string over = error_at(8);
  EXPECT_NE(over.find("batch 7"), std::string::npos) << over;
  EXPECT_NE(over.find("12 patches, more than the 8"), std::string::npos) << over;
  const std::string partial = error_at(14);
  EXPECT_NE(partial.find("not whole merged patches"), std::string::npos) << partial;
}

// B times the most patches of one row, each image's (height / patch) · (width / patch).
TEST(VisionBatchInputs, PatchCapacityIsTheBatchTimesTheLargestRow) {
  data::PackedRowsView rows;
  const std::vector<uint64_t> segments = {0, 1, 2, 3};
  const std::vector<uint64_t> offsets = {0, 2, 2, 3};  // row 0: two images, row 1: none, row 2: one
  const std::vector<int32_t> sizes = {16, 8, /**/ 8, 8, /**/ 24, 16};  // 8 + 4 patches; 24 patches
  rows.row_segment_offsets = segments;
  rows.row_image_offsets = offsets;
  rows.image_sizes = sizes;
  EXPECT_EQ(vision_patch_capacity(rows, 2, 4), 48);
  data::PackedRowsView text;
  text.row_segment_offsets = segments;
  EXPECT_EQ(vision_patch_capacity(text, 2, 4), 0);
}

// The Qwen3-VL fixture's plan for `batch`, bound as the trainer binds it (fp32 on the CPU).
struct Qwen3FixtureRun {
  Qwen3FixtureRun(const data::PackedBatch& batch, std::optional<int64_t> plan_patches)
      : config(models::Qwen3VLModelConfig::from_folder(kQwen3Dir)),
        tensors(vision_batch_tensors(batch, fixture_processor(), config, "batch 0", plan_patches)),
        registry(ops::make_model_registry()),
        plan(plan_of(config, registry, batch, tensors.patches)),
        text(plan),
        bindings(qwen3_vl_batch_bindings(plan, text.bind(batch, 1.0f / 5), tensors, batch.mrope_position_ids,
                                         std::as_bytes(std::span<const float>(tensors.pixel_values)),
                                         std::as_bytes(std::span<const float>(tensors.qwen3_tower.interpolation_weights)))) {
    backend.load(plan, registry);
    models::load_vision_model_text_weights(kQwen3Dir, config.text, [&](const models::ParameterSpec& spec, const io::SafetensorsTensor& t) {
      backend.write_converted(plan.tensor(spec.name), t.dtype, t.bytes);
    });
    models::load_qwen3_vision_tower_weights(kQwen3Dir, config.vision, [&](const models::VisionTowerParameter& p, const io::SafetensorsTensor& t) {
      backend.write_converted(plan.tensor(p.name), t.dtype, t.bytes);
    });
  }
  static compiler::ExecutionPlan plan_of(const models::Qwen3VLModelConfig& config, const graph::OpRegistry& registry,
                                         const data::PackedBatch& batch, int64_t patches) {
    models::DecoderGraphOptions options;
    options.batch = batch.batch_size;
    options.sequence = batch.sequence_length;
    models::Qwen3VLModelGraph model = models::build_qwen3_vl_model_graph(config, registry, options, patches, true);
    return compiler::compile_training(std::move(model.graph), model.loss, registry);
  }
  PlanResult execute() {
    backend.zero_gradients();
    backend.execute(bindings);
    PlanResult result;
    backend.read(plan.tensor("loss"), std::as_writable_bytes(std::span<float>(&result.loss, 1)));
    for (const auto& [parameter, gradient] : plan.parameter_gradients) {
      std::vector<float> values(static_cast<size_t>(plan.graph.tensor(gradient).type.numel()));
      backend.read(gradient, std::as_writable_bytes(std::span<float>(values)));
      result.gradients[plan.graph.tensor(parameter).name] = std::move(values);
    }
    return result;
  }

  static inline const std::filesystem::path kQwen3Dir =
      std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision" / "qwen3_vl_model";
  models::Qwen3VLModelConfig config;
  VisionBatchTensors tensors;
  graph::OpRegistry registry;
  compiler::ExecutionPlan plan;
  BatchInputs text;
  std::vector<runtime::InputBinding> bindings;
  runtime::CpuBackend backend;
};

// Qwen3-VL: every input bound once at its size, the DeepStack index from the splice, and padding
// (its own frame, never spliced nor DeepStack-added) changing no loss or gradient, within the
// Qwen2.5-VL test's bounds (BLAS blocking over more rows).
TEST(VisionBatchInputs, Qwen3VLBindsEveryInputAndPaddingChangesNoLossOrGradient) {
  const data::PackedBatch batch = two_rows();
  Qwen3FixtureRun exact_run(batch, std::nullopt);
  std::map<graph::TensorId, size_t> bound;
  for (const runtime::InputBinding& binding : exact_run.bindings) {
    EXPECT_EQ(bound.count(binding.tensor), 0u) << exact_run.plan.graph.tensor(binding.tensor).name;
    bound[binding.tensor] = binding.data.size();
  }
  ASSERT_EQ(bound.size(), exact_run.plan.graph.inputs.size());
  for (graph::TensorId input : exact_run.plan.graph.inputs) {
    EXPECT_EQ(bound[input], exact_run.plan.graph.tensor(input).type.size_bytes()) << exact_run.plan.graph.tensor(input).name;
  }
  EXPECT_EQ(exact_run.tensors.deepstack_index, (std::vector<int32_t>{0, 1, 2, 0, 0, 0, /**/ 0, 3, 0, 0, 0, 0}));
  const PlanResult exact = exact_run.execute();
  EXPECT_TRUE(std::isfinite(exact.loss));
  for (int64_t plan_patches : {20, 40}) {
    Qwen3FixtureRun padded_run(batch, plan_patches);
    const PlanResult padded = padded_run.execute();
    EXPECT_NEAR(padded.loss, exact.loss, 1e-6 * std::abs(exact.loss)) << plan_patches;
    expect_same_gradients(exact, padded, plan_patches);
  }
  const std::vector<float>& pos_embed = exact.gradients.at("visual.pos_embed.weight");
  EXPECT_TRUE(std::any_of(pos_embed.begin(), pos_embed.end(), [](float value) { return value != 0.0f; }));
}

}  // namespace
}  // namespace surogate::train
