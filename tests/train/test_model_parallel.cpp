// Sequence and pipeline parallelism on CPU ranks train the quickstart job as one rank does with the
// same global batch. The runs are packed (sequence_len 64, several documents per row), so the
// document masks cross the sequence-parallel slices; the exchange ops only move values and every
// per-token op computes the same thing on a slice, so what differs from one rank is the order of
// the fp32 gradient sums (each rank sums its tokens' or its stage's contributions, then gloo sums
// the ranks), and in the pipeline the tied embedding's two gradients are added after accumulation
// rather than per micro-batch. Stated tolerances, as the data-parallel tests': per-step losses
// within 2e-4 relative, weights after the run within 5e-5 absolute. The runs use adamw_epsilon
// 1e-6: a sequence slice splits each weight gradient's sum over tokens, and where those terms
// cancel to a gradient at rounding level (~1e-9) AdamW with epsilon 1e-8 turns its rounding
// difference into a step of up to the learning rate (measured 2026-11-25: 2 of 49152 elements of
// one matrix 2.3e-4 apart after 5 steps, every other weight within 1e-5, the losses within 3e-8
// relative); with 1e-6 such gradients move their weight by ~g/ε · lr, and the largest difference is
// 1.2e-6. Checkpoints hold the single-rank tensors, so a run stopped under one layout resumes
// under another.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/execution_plan.h"
#include "compiler/recompute.h"
#include "compiler/weight_gathering.h"
#include "distributed/sequence_exchange_ops.h"
#include "io/model_config.h"
#include "core/error.h"
#include "graph/builder.h"
#include "io/safetensors.h"
#include "models/lora.h"
#include "ops/defs/register_ops.h"
#include "train/device/micro_batch.h"
#include "train/device/backend_selection.h"
#include "train/device/memory_budget.h"
#include "train/device/weight_shards.h"
#include "train/training_plan.h"
#include "cpu_ranks_fixture.h"

namespace surogate::train {
namespace {
namespace fs = std::filesystem;

constexpr double kRelativeTolerance = 2e-4;
constexpr double kWeightTolerance = 5e-5;
// Every run's optimizer settings (AdamW, see above).
const std::string kOptimizer = "adamw_epsilon: 1e-6\n";

class ModelParallelTest : public CpuRanksFixture {
protected:
  // The quickstart model with 4 layers and 4 key/value heads (4 stages, 4 sequence ranks).
  static std::string wider_model() {
    const fs::path wider = root_ / "example" / "model-4x4";
    if (!fs::exists(wider)) {
      fs::copy(root_ / "example" / "model", wider, fs::copy_options::recursive);
      nlohmann::json config = nlohmann::json::parse(std::ifstream(wider / "config.json"));
      config["num_hidden_layers"] = 4;
      config["num_key_value_heads"] = 4;
      std::ofstream(wider / "config.json") << config.dump(2);
    }
    return "model: " + wider.string() + "\n";
  }
  static void expect_same_training(const TrainingResult& one, const std::string& one_name, const TrainingResult& many,
                                   const std::string& many_name, int steps) {
    ASSERT_EQ(one.step_losses.size(), many.step_losses.size());
    for (size_t i = 0; i < one.step_losses.size(); ++i) {
      EXPECT_NEAR(many.step_losses[i], one.step_losses[i], kRelativeTolerance * std::fabs(one.step_losses[i]))
          << "step " << i + 1;
    }
    const std::string checkpoint = fmt::format("checkpoint-{}", steps);
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      io::SafetensorsFile a = io::SafetensorsFile::open(root_ / one_name / checkpoint / file);
      io::SafetensorsFile b = io::SafetensorsFile::open(root_ / many_name / checkpoint / file);
      ASSERT_EQ(a.tensors().size(), b.tensors().size()) << file << ": the single-rank tensors";
      if (std::string(file) != "model.safetensors") continue;
      const double largest =
          largest_f32_difference(root_ / one_name / checkpoint / file, root_ / many_name / checkpoint / file);
      fmt::print("{} against {}: largest weight difference {:.2e}\n", many_name, one_name, largest);
      EXPECT_LT(largest, kWeightTolerance);
    }
  }
};

TEST_F(ModelParallelTest, TwoSequenceRanksFullFineTuningMatchOneRank) {
  const std::string common = kOptimizer + "max_steps: 5\nsave_steps: 5\ngradient_accumulation_steps: 2\n";
  TrainingResult one = run_training(config("sp2_full_1", common), cpu());
  TrainingResult two = run_training(config("sp2_full_2", common + "gpus: 2\nsequence_parallel_size: 2\n"), cpu());
  expect_same_training(one, "sp2_full_1", two, "sp2_full_2", 5);
  ASSERT_TRUE(one.eval_loss && two.eval_loss);
  EXPECT_NEAR(*two.eval_loss, *one.eval_loss, kRelativeTolerance * *one.eval_loss);
}

TEST_F(ModelParallelTest, FourSequenceRanksLoraMatchOneRank) {
  const std::string common = kOptimizer + wider_model() + "max_steps: 4\nsave_steps: 4\nlora: true\nlora_rank: 4\nlora_dropout: 0.0\n"
                                             "learning_rate: 1e-2\ngradient_accumulation_steps: 2\n";
  TrainingResult one = run_training(config("sp4_lora_1", common), cpu());
  TrainingResult four = run_training(config("sp4_lora_4", common + "gpus: 4\nsequence_parallel_size: 4\n"), cpu());
  expect_same_training(one, "sp4_lora_1", four, "sp4_lora_4", 4);
}

// 2 replicas × 2 sequence ranks, ZeRO-2 over all four, clipping active.
TEST_F(ModelParallelTest, SequenceAndDataParallelWithZeroTwoMatchOneRank) {
  const std::string common = kOptimizer + "max_steps: 4\nsave_steps: 4\nmax_grad_norm: 0.5\n";
  TrainingResult one = run_training(config("sp2dp2_1", common + "gradient_accumulation_steps: 2\n"), cpu());
  TrainingResult four = run_training(
      config("sp2dp2_4", common + "gpus: 4\nsequence_parallel_size: 2\nzero_level: 2\ngradient_accumulation_steps: 1\n"),
      cpu());
  expect_same_training(one, "sp2dp2_1", four, "sp2dp2_4", 4);
}

// ZeRO-3 over the sequence ranks: each keeps its shard of the weights, gathered per layer around
// the exchange ops of the sequence slice's plan; the evaluator reads the weights gathered to the host.
TEST_F(ModelParallelTest, TwoSequenceRanksWithZeroThreeFullFineTuningMatchOneRank) {
  const std::string common = kOptimizer + "max_steps: 5\nsave_steps: 5\ngradient_accumulation_steps: 2\n";
  TrainingResult one = run_training(config("sp2_zero3_1", common), cpu());
  TrainingResult two =
      run_training(config("sp2_zero3_2", common + "gpus: 2\nsequence_parallel_size: 2\nzero_level: 3\n"), cpu());
  expect_same_training(one, "sp2_zero3_1", two, "sp2_zero3_2", 5);
  ASSERT_TRUE(one.eval_loss && two.eval_loss);
  EXPECT_NEAR(*two.eval_loss, *one.eval_loss, kRelativeTolerance * *one.eval_loss);
  EXPECT_LT(largest_f32_difference(root_ / "sp2_zero3_1" / "model.safetensors", root_ / "sp2_zero3_2" / "model.safetensors"),
            kWeightTolerance);
}

// The gather schedule over a sequence slice's plan is the whole sequence's: the same uses of the
// same groups in the same order (the exchange ops read no weight), and every exchange step, in the
// forward, the recompute and the backward, lies inside a use of its own layer, so the all-to-alls
// of a layer run between gathers, never across one.
TEST_F(ModelParallelTest, ZeroThreeGathersASequenceSliceAsTheWholeSequence) {
  const Config base = config("gather_schedule", "gpus: 2\nzero_level: 3\n");
  const io::ModelConfig model = io::load_model_config(root_ / "example" / "model");
  const graph::OpRegistry registry = make_training_registry();
  auto gathering_of = [&](int64_t sequence_ranks, compiler::ExecutionPlan& plan) {
    Config variant = base;
    variant.parallel.sequence_parallel_size = sequence_ranks;
    plan = plan_training(variant, model, registry, nullptr, TrainingBackend::Cpu, 2, 64, DeviceMemory{},
                         compiler::RecomputePolicy::all())
               .plan;
    std::vector<compiler::ShardedWeight> weights;
    for (graph::TensorId id : shardable_weights(plan)) weights.push_back({id, static_cast<int>(weights.size() % 2)});
    return compiler::schedule_weight_gathering(plan, weights, 2);
  };
  compiler::ExecutionPlan whole_plan, slice_plan;
  const compiler::WeightGathering whole = gathering_of(1, whole_plan), slice = gathering_of(2, slice_plan);
  auto groups_in_use_order = [](const compiler::WeightGathering& gathering) {
    std::vector<std::string> names;
    for (const compiler::GatherUse& use : gathering.uses) names.push_back(gathering.groups[use.group].name);
    return names;
  };
  EXPECT_EQ(groups_in_use_order(slice), groups_in_use_order(whole));
  // Each layer's forward and its recompute-and-backward, beside the embedding's and the head's.
  EXPECT_GE(std::ranges::count_if(slice.uses, [&](const compiler::GatherUse& use) {
              return slice.groups[use.group].name.starts_with("layers.");
            }),
            4);
  size_t exchanges = 0;
  for (size_t step = 0; step < slice_plan.steps.size(); ++step) {
    const graph::Node& node = slice_plan.graph.node(slice_plan.steps[step].node);
    if (node.op != distributed::kSequenceToHeads && node.op != distributed::kHeadsToSequence) continue;
    ++exchanges;
    const bool inside = std::ranges::any_of(slice.uses, [&](const compiler::GatherUse& use) {
      return slice.groups[use.group].name.starts_with("layers.") && use.first_step < static_cast<int>(step) &&
             static_cast<int>(step) < use.last_step;
    });
    EXPECT_TRUE(inside) << "exchange step " << step << " (" << node.name << ") lies outside every layer's use";
  }
  // 2 layers × 4 exchanges, in the forward, the recompute and the backward.
  EXPECT_EQ(exchanges, 24u);
}

// On GPUs a sequence group's NCCL all-to-alls hold buffers the plan does not see: one group's per
// GPU with sequence parallelism alone, two with pipeline stages (a stage's training and forward
// plans run on two streams, each with a group of its own: cuda_sequence_groups.h).
TEST_F(ModelParallelTest, GpuPredictionCountsOneSequenceGroupPerStream) {
  const io::ModelConfig model = io::load_model_config(root_ / "example" / "model");
  const graph::OpRegistry registry = make_training_registry();
  auto collectives = [&](const std::string& extra) {
    const Config variant = config("collectives", "gpus: 4\nsequence_parallel_size: 2\n" + extra);
    const DeviceMemory device{.name = "a GPU of 80 GiB", .offered_bytes = size_t{80} << 30, .total_bytes = size_t{80} << 30,
                              .visible_gpus = 4};
    return plan_training(variant, model, registry, nullptr, TrainingBackend::Cuda, 2, 64, device).memory.collectives;
  };
  EXPECT_EQ(collectives(""), kSequenceExchangeBufferBytes);
  EXPECT_EQ(collectives("pipeline_parallel_size: 2\n"), 2 * kSequenceExchangeBufferBytes);
}

// 2 replicas × 2 sequence ranks, ZeRO-3 over all four: LoRA with its frozen base sharded too, and
// QLoRA with the quantized base shared out over the ranks as bytes. The split runs recompute every
// block, so each layer's weights are gathered again for a backward whose recompute holds the
// exchange ops (recompute gives the gradients bit for bit).
TEST_F(ModelParallelTest, SequenceAndDataParallelWithZeroThreeLoraAndQloraMatchOneRank) {
  TrainerOptions recomputed = cpu();
  recomputed.recompute = compiler::RecomputePolicy::all();
  const std::string lora = kOptimizer + "max_steps: 4\nsave_steps: 4\nlora: true\nlora_rank: 4\nlora_dropout: 0.0\n"
                                        "learning_rate: 1e-2\nmax_grad_norm: 0.5\n";
  const std::string four_ranks = "gpus: 4\nsequence_parallel_size: 2\nzero_level: 3\ngradient_accumulation_steps: 1\n";
  TrainingResult one = run_training(config("sp2dp2_zero3_lora_1", lora + "gradient_accumulation_steps: 2\n"), cpu());
  TrainingResult four = run_training(config("sp2dp2_zero3_lora_4", lora + four_ranks), recomputed);
  expect_same_training(one, "sp2dp2_zero3_lora_1", four, "sp2dp2_zero3_lora_4", 4);
  const std::string qlora = lora + "qlora_bnb: true\n";
  TrainingResult qlora_one = run_training(config("sp2dp2_zero3_qlora_1", qlora + "gradient_accumulation_steps: 2\n"), cpu());
  TrainingResult qlora_four = run_training(config("sp2dp2_zero3_qlora_4", qlora + four_ranks), recomputed);
  expect_same_training(qlora_one, "sp2dp2_zero3_qlora_1", qlora_four, "sp2dp2_zero3_qlora_4", 4);
  // The quantized base kept whole on every rank, or in the host image, reads the same bytes: the
  // same numbers bit for bit (train/device/quantized_base_shards.h).
  for (const auto& [name, keeping] : {std::pair{"whole", "persistent_quants: true\n"},
                                       std::pair{"offloaded", "persistent_quants: true\noffload_quants: true\n"}}) {
    SCOPED_TRACE(name);
    TrainingResult kept =
        run_training(config(std::string("sp2dp2_zero3_qlora_") + name, qlora + four_ranks + keeping), recomputed);
    EXPECT_EQ(kept.step_losses, qlora_four.step_losses);
  }
}

// The quickstart model ties its embeddings: the first stage owns them, the last stage's head
// gradient is added to them.
TEST_F(ModelParallelTest, TwoStagesFullFineTuningWithTiedEmbeddingsMatchOneRank) {
  const std::string common = kOptimizer + "max_steps: 5\nsave_steps: 5\ngradient_accumulation_steps: 4\n";
  TrainingResult one = run_training(config("pp2_full_1", common), cpu());
  TrainingResult two = run_training(config("pp2_full_2", common + "gpus: 2\npipeline_parallel_size: 2\n"), cpu());
  expect_same_training(one, "pp2_full_1", two, "pp2_full_2", 5);
  ASSERT_TRUE(one.eval_loss && two.eval_loss);
  EXPECT_NEAR(*two.eval_loss, *one.eval_loss, kRelativeTolerance * *one.eval_loss);
}

// fp16 (torch_dtype: float16, the CPU's emulation with dynamic loss scaling): the stages'
// gradients come scaled by the loss scale and each rank's step unscales them, as one rank's does.
// A large adamw_epsilon makes the update depend on the gradients' size, so a stage that stepped the
// scaled gradients would move its weights far from one rank's.
TEST_F(ModelParallelTest, TwoStagesInFp16UnscaleTheirGradientsAsOneRank) {
  const std::string common = "adamw_epsilon: 0.1\nmax_grad_norm: 0\ntorch_dtype: float16\nmax_steps: 3\nsave_steps: 3\n"
                             "gradient_accumulation_steps: 2\n";
  TrainingResult one = run_training(config("pp2_fp16_1", common), cpu());
  TrainingResult two = run_training(config("pp2_fp16_2", common + "gpus: 2\npipeline_parallel_size: 2\n"), cpu());
  expect_same_training(one, "pp2_fp16_1", two, "pp2_fp16_2", 3);
}

TEST_F(ModelParallelTest, FourStagesLoraMatchOneRank) {
  const std::string common = kOptimizer + wider_model() + "max_steps: 4\nsave_steps: 4\nlora: true\nlora_rank: 4\nlora_dropout: 0.0\n"
                                             "learning_rate: 1e-2\ngradient_accumulation_steps: 3\n";
  TrainingResult one = run_training(config("pp4_lora_1", common), cpu());
  TrainingResult four = run_training(config("pp4_lora_4", common + "gpus: 4\npipeline_parallel_size: 4\n"), cpu());
  expect_same_training(one, "pp4_lora_1", four, "pp4_lora_4", 4);
}

// 2 replicas × 2 stages set by the user (1 + 3 layers), ZeRO-2 within each stage.
TEST_F(ModelParallelTest, StagesWithDataParallelAndUserBoundariesMatchOneRank) {
  const std::string common = kOptimizer + wider_model() + "max_steps: 4\nsave_steps: 4\nmax_grad_norm: 0.5\n";
  TrainingResult one = run_training(config("pp2dp2_1", common + "gradient_accumulation_steps: 4\n"), cpu());
  TrainingResult four = run_training(config("pp2dp2_4", common + "gpus: 4\npipeline_parallel_size: 2\nzero_level: 2\n"
                                                                  "pipeline_stage_layers: [1, 3]\n"
                                                                  "gradient_accumulation_steps: 2\n"),
                                     cpu());
  expect_same_training(one, "pp2dp2_1", four, "pp2dp2_4", 4);
}

// 3D parallelism: each stage's plans are a sequence slice's, boundary tensors go between the same
// sequence index of adjacent stages, and each stage's gradients are summed over its data × sequence
// ranks. The quickstart model ties its embeddings: one tied pair per sequence index.
TEST_F(ModelParallelTest, TwoSequenceRanksTimesTwoStagesFullFineTuningMatchOneRank) {
  const std::string common = kOptimizer + "max_steps: 4\nsave_steps: 4\ngradient_accumulation_steps: 2\n";
  TrainingResult one = run_training(config("sp2pp2_full_1", common), cpu());
  TrainingResult four = run_training(
      config("sp2pp2_full_4", common + "gpus: 4\nsequence_parallel_size: 2\npipeline_parallel_size: 2\n"), cpu());
  expect_same_training(one, "sp2pp2_full_1", four, "sp2pp2_full_4", 4);
  ASSERT_TRUE(one.eval_loss && four.eval_loss);
  EXPECT_NEAR(*four.eval_loss, *one.eval_loss, kRelativeTolerance * *one.eval_loss);
}

// 2 replicas × 2 sequence ranks × 2 stages (1 + 3 layers), LoRA, ZeRO-2 over each stage's four
// ranks, clipping active.
TEST_F(ModelParallelTest, DataTimesSequenceTimesStagesLoraMatchOneRank) {
  const std::string common = kOptimizer + wider_model() + "max_steps: 3\nsave_steps: 3\nlora: true\nlora_rank: 4\n"
                                             "lora_dropout: 0.0\nlearning_rate: 1e-2\nmax_grad_norm: 0.5\n";
  TrainingResult one = run_training(config("dp2sp2pp2_lora_1", common + "gradient_accumulation_steps: 4\n"), cpu());
  TrainingResult eight = run_training(
      config("dp2sp2pp2_lora_8", common + "gpus: 8\nsequence_parallel_size: 2\npipeline_parallel_size: 2\n"
                                          "pipeline_stage_layers: [1, 3]\nzero_level: 2\ngradient_accumulation_steps: 2\n"),
      cpu());
  expect_same_training(one, "dp2sp2pp2_lora_1", eight, "dp2sp2pp2_lora_8", 3);
}

// QLoRA (the NF4 base reaches every rank's plans through store_quantized) and pt.
TEST_F(ModelParallelTest, QloraAndPretrainingSplitAsOneRank) {
  const std::string qlora = kOptimizer + "max_steps: 3\nsave_steps: 3\nlora: true\nlora_rank: 4\nlora_dropout: 0.0\n"
                                         "qlora_bnb: true\nlearning_rate: 1e-2\ngradient_accumulation_steps: 2\n";
  TrainingResult one = run_training(config("qlora_1", qlora), cpu());
  TrainingResult sequence = run_training(config("qlora_sp2", qlora + "gpus: 2\nsequence_parallel_size: 2\n"), cpu());
  TrainingResult pipeline = run_training(config("qlora_pp2", qlora + "gpus: 2\npipeline_parallel_size: 2\n"), cpu());
  expect_same_training(one, "qlora_1", sequence, "qlora_sp2", 3);
  expect_same_training(one, "qlora_1", pipeline, "qlora_pp2", 3);
  const std::string pt = kOptimizer + "max_steps: 3\nsave_steps: 3\ngradient_accumulation_steps: 2\n";
  TrainerOptions pretraining = cpu();
  pretraining.pretraining = true;
  TrainingResult pt_one = run_training(config("pt_1", pt, true), pretraining);
  TrainingResult pt_sequence = run_training(config("pt_sp2", pt + "gpus: 2\nsequence_parallel_size: 2\n", true), pretraining);
  TrainingResult pt_pipeline = run_training(config("pt_pp2", pt + "gpus: 2\npipeline_parallel_size: 2\n", true), pretraining);
  expect_same_training(pt_one, "pt_1", pt_sequence, "pt_sp2", 3);
  expect_same_training(pt_one, "pt_1", pt_pipeline, "pt_pp2", 3);
}

// A checkpoint has the single-rank tensors: a pipeline run resumes exactly on its own layout, and
// a run stopped with two sequence ranks continues with two pipeline stages, one stopped on 2
// sequence ranks × 2 stages on one rank (each matching one rank).
TEST_F(ModelParallelTest, ResumeExactlyAndAcrossLayouts) {
  const std::string common = kOptimizer + "max_steps: 8\nsave_steps: 4\noptimizer: adamw_8bit\ngradient_accumulation_steps: 2\n";
  const std::string pipeline = common + "gpus: 2\npipeline_parallel_size: 2\n";
  TrainingResult straight = run_training(config("pp_straight", pipeline), cpu());
  ASSERT_EQ(straight.step_losses.size(), 8u);
  TrainerOptions interrupted = cpu();
  interrupted.stop_after_step = 4;
  ASSERT_EQ(run_training(config("pp_resumed", pipeline), interrupted).step_losses.size(), 4u);
  TrainingResult resumed = run_training(config("pp_resumed", pipeline + "resume_from_checkpoint: true\n"), cpu());
  expect_continues(resumed, straight, 4, 0.0);

  const std::string sequence = common + "gpus: 2\nsequence_parallel_size: 2\n";
  ASSERT_EQ(run_training(config("sp_then_pp", sequence), interrupted).step_losses.size(), 4u);
  TrainingResult continued = run_training(config("sp_then_pp", pipeline + "resume_from_checkpoint: true\n"), cpu());
  ASSERT_EQ(continued.first_step, 4);
  ASSERT_EQ(continued.step_losses.size(), 4u);
  TrainingResult one = run_training(config("one_straight", common), cpu());
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(continued.step_losses[i], one.step_losses[4 + i], kRelativeTolerance * one.step_losses[4 + i])
        << "step " << i + 5;
  }
  // 3D: a run stopped on 2 sequence ranks × 2 stages continues on one rank.
  const std::string both = common + "gpus: 4\nsequence_parallel_size: 2\npipeline_parallel_size: 2\n";
  ASSERT_EQ(run_training(config("sp_pp_then_one", both), interrupted).step_losses.size(), 4u);
  TrainingResult alone = run_training(config("sp_pp_then_one", common + "resume_from_checkpoint: true\n"), cpu());
  expect_continues(alone, one, 4, kRelativeTolerance);
}

// Under ZeRO-3 too a checkpoint holds the single-rank tensors: two sequence ranks resume exactly on
// their layout, and the same checkpoint continues on 2 data × 2 sequence ranks (ZeRO-3) and on
// two data-parallel ranks without sequence parallelism, each with the same global batch.
TEST_F(ModelParallelTest, ZeroThreeSequenceRanksResumeExactlyAndAcrossLayouts) {
  const std::string common = kOptimizer + "max_steps: 8\nsave_steps: 4\noptimizer: adamw_8bit\n";
  const std::string sequence = common + "gpus: 2\nsequence_parallel_size: 2\nzero_level: 3\ngradient_accumulation_steps: 2\n";
  TrainingResult straight = run_training(config("sp_zero3_straight", sequence), cpu());
  ASSERT_EQ(straight.step_losses.size(), 8u);
  TrainerOptions interrupted = cpu();
  interrupted.stop_after_step = 4;
  ASSERT_EQ(run_training(config("sp_zero3_resumed", sequence), interrupted).step_losses.size(), 4u);
  TrainingResult resumed = run_training(config("sp_zero3_resumed", sequence + "resume_from_checkpoint: true\n"), cpu());
  expect_continues(resumed, straight, 4, 0.0);

  const std::vector<std::pair<std::string, std::string>> continuations = {
      {"sp_zero3_on_dp2_sp2", "gpus: 4\nsequence_parallel_size: 2\nzero_level: 3\ngradient_accumulation_steps: 1\n"},
      {"sp_zero3_on_dp2", "gpus: 2\nzero_level: 3\ngradient_accumulation_steps: 1\n"}};
  for (const auto& [name, layout] : continuations) {
    SCOPED_TRACE(name);
    copy_checkpoint("sp_zero3_resumed", name, "checkpoint-4");
    TrainingResult continued = run_training(config(name, common + layout + "resume_from_checkpoint: true\n"), cpu());
    expect_continues(continued, straight, 4, kRelativeTolerance);
  }
}

TEST_F(ModelParallelTest, LayoutMistakesNameTheOption) {
  auto error_of = [](const Config& config) {
    try {
      run_training(config, cpu());
    } catch (const UserError& error) {
      return std::string(error.what());
    }
    ADD_FAILURE() << "no UserError";
    return std::string();
  };
  // The quickstart model has 2 key/value heads: 4 sequence ranks cannot split them.
  EXPECT_NE(error_of(config("bad_heads", "max_steps: 1\ngpus: 4\nsequence_parallel_size: 4\n"))
                .find("sequence_parallel_size: 4 gives each rank of a sequence group 1/4 of the attention heads"),
            std::string::npos);
  EXPECT_NE(error_of(config("bad_ranks", "max_steps: 1\ngpus: 3\npipeline_parallel_size: 2\n"))
                .find("pipeline_parallel_size: 2 needs the ranks to be a multiple of 2, but this run has 3 ranks"),
            std::string::npos);
  EXPECT_NE(error_of(config("bad_stages", "max_steps: 1\ngpus: 4\npipeline_parallel_size: 4\n"))
                .find("needs at least one layer per stage, but the model has 2 layers"),
            std::string::npos);
}

// A sequence rank keeps its slice of each row of the token inputs, the other inputs whole, and a
// dropout seed of its own (else every slice would draw the same masks).
TEST(SequenceSlices, EachRankKeepsItsTokensAndDrawsItsOwnDropout) {
  const graph::OpRegistry registry = ops::make_model_registry();
  auto plan_with_tokens = [&](int64_t tokens) {
    graph::GraphBuilder b(registry);
    const graph::TensorId ids = b.input("input_ids", DType::F32, {2, tokens});
    const graph::TensorId documents = b.input("document_ids", DType::F32, {2, 8});
    const graph::TensorId seed = b.input(models::kDropoutSeed, DType::I32, {});
    b.mark_output(b.op("sum", {b.op("dropout", {ids, seed}, {{"p", 0.1}, {"stream", 0}})}, nlohmann::json::object(), "a"));
    b.mark_output(b.op("sum", {documents}, nlohmann::json::object(), "b"));
    return compiler::compile_forward(b.finish(), registry);
  };
  const compiler::ExecutionPlan whole = plan_with_tokens(8), sliced = plan_with_tokens(4);
  std::vector<float> ids(16), documents(16);
  for (size_t i = 0; i < 16; ++i) ids[i] = documents[i] = static_cast<float>(i);
  const int32_t seed = 12345;
  const std::vector<runtime::InputBinding> inputs = {
      {whole.tensor("input_ids"), std::as_bytes(std::span<const float>(ids))},
      {whole.tensor("document_ids"), std::as_bytes(std::span<const float>(documents))},
      {whole.tensor(models::kDropoutSeed), std::as_bytes(std::span<const int32_t>(&seed, 1))}};
  std::vector<int32_t> seeds;
  for (int rank = 0; rank < 2; ++rank) {
    const MicroBatch batch = copy_micro_batch(whole, sliced, inputs, rank, 2);
    ASSERT_EQ(batch.tensors.size(), 3u);
    std::vector<float> slice(8);
    std::memcpy(slice.data(), batch.bytes[0].data(), 32);
    for (int64_t row = 0; row < 2; ++row) {
      for (int64_t t = 0; t < 4; ++t) EXPECT_EQ(slice[row * 4 + t], static_cast<float>(row * 8 + rank * 4 + t));
    }
    EXPECT_EQ(batch.bytes[1].size(), 64u);  // the document ids whole
    int32_t drawn = 0;
    std::memcpy(&drawn, batch.bytes[2].data(), 4);
    seeds.push_back(drawn);
  }
  EXPECT_NE(seeds[0], seeds[1]);
  // Without sequence parallelism everything is copied as bound.
  const MicroBatch plain = copy_micro_batch(whole, whole, inputs);
  int32_t kept = 0;
  std::memcpy(&kept, plain.bytes[2].data(), 4);
  EXPECT_EQ(kept, seed);
}

}  // namespace
}  // namespace surogate::train
