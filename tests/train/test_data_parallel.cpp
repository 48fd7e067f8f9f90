// gpus: N on the CPU backend (N data-parallel ranks, ZeRO-1) trains the quickstart job as one rank
// does with the same global batch: N ranks × gradient_accumulation_steps A against one rank with
// accumulation N·A reads the same micro-batches in the same order and normalises by the same loss
// tokens, so the per-step losses differ only by the order of fp32 additions (each rank sums its
// own micro-batches, then gloo's ring sums the ranks). Stated tolerances: per-step losses within
// 2e-4 relative, weights after the run within 5e-5 absolute (measured 2026-11-25 on the
// quickstart data: losses within 2e-8 relative, often identical to the last bit, and weights
// within 4.4e-6 (LoRA, lr 1e-2), 1.5e-6 (ZeRO-2), 8e-7 (full)). Checkpoints have the
// single-rank format; a run resumes exactly on the same world size and continues on another.
// fp8_hybrid: after one step the scaling state of 4 ranks equals one rank's bit for bit (each rank
// quantizes a tensor from its own amax until a step is recorded, and the ranks' amaxes are
// all-reduced with the max before the roll); over 6 steps the losses and weights of full
// fine-tuning, and of LoRA on 3 ranks, stay within the same tolerances (a last-bit weight
// difference can move one element to the neighbouring E4M3 code; measured below 1e-6 relative),
// and a 3-rank fp8 run resumes exactly. Without the all-reduce both the state check (4 ranks) and
// the weights (2 ranks: 1.4e-2 apart) fail; with it, measured 2026-11-25: losses within 1.9e-8
// relative, weights within 8.7e-7.
// ZeRO-3 (zero_level: 3): each rank keeps its shard of the weights (the base included under
// LoRA) and gathers a layer's weights one use ahead of the steps that read them; the same
// tolerances hold for full fine-tuning, LoRA with dropout and pt with NorMuon (the gradients are
// the same sums as ZeRO-2's, and the gathered weights are the owners' bits), a ZeRO-3 run resumes
// exactly on its world size and continues on another (ZeRO-3 or one rank). The gradients travel
// in buckets during the last micro-batch's backward (ZeRO-1), or every micro-batch's into the
// shard's accumulators (ZeRO-2/3): with buckets of 4 KiB (a dozen or more on the quickstart
// model) two ranks give bit for bit what one bucket gives (a sum of two fp32 values does not
// depend on the order), ZeRO-1 and ZeRO-2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "train/device/backend_selection.h"
#include "cpu_ranks_fixture.h"

namespace surogate::train {
namespace {
namespace fs = std::filesystem;

constexpr double kRelativeTolerance = 2e-4;
constexpr double kWeightTolerance = 5e-5;

class DataParallelTest : public CpuRanksFixture {
protected:
  static TrainerOptions quiet(bool pretraining = false) { return cpu(pretraining); }
  // Gradient buckets small enough that the quickstart model's gradients travel in many.
  static TrainerOptions small_buckets(bool pretraining = false) {
    TrainerOptions options = quiet(pretraining);
    options.gradient_bucket_bytes = 4096;
    return options;
  }
  static void expect_same_losses(const std::vector<double>& one, const std::vector<double>& many) {
    ASSERT_EQ(one.size(), many.size());
    double largest = 0.0;
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_NEAR(many[i], one[i], kRelativeTolerance * std::fabs(one[i])) << "step " << i + 1;
      largest = std::max(largest, std::fabs(many[i] - one[i]) / std::fabs(one[i]));
    }
    fmt::print("largest relative loss difference over {} steps: {:.2e}\n", one.size(), largest);
  }
  static double largest_weight_difference(const fs::path& a, const fs::path& b) {
    const double largest = largest_f32_difference(a, b);
    fmt::print("largest weight difference: {:.2e}\n", largest);
    return largest;
  }
  // The steps' gradient norms (before clipping) from the run's JSONL log.
  static std::vector<double> grad_norms(const TrainingResult& result) {
    std::vector<double> norms;
    std::ifstream log(result.log_file);
    for (std::string line; std::getline(log, line);) {
      const nlohmann::json record = nlohmann::json::parse(line);
      if (record.value("type", "") == "step") norms.push_back(record.at("grad_norm").get<double>());
    }
    return norms;
  }
  static std::set<std::string> tensor_names(const fs::path& file) {
    std::set<std::string> names;
    io::SafetensorsFile safetensors = io::SafetensorsFile::open(file);
    for (const auto& tensor : safetensors.tensors()) names.insert(fmt::format("{} {}", tensor.name, fmt::join(tensor.shape, "x")));
    return names;
  }
};

TEST_F(DataParallelTest, TwoRanksFullFineTuningMatchOneRankWithTheSameGlobalBatch) {
  const std::string common = "max_steps: 6\noptimizer: adamw\n";
  TrainingResult one = run_training(config("dp_full_1", common + "gradient_accumulation_steps: 4\n"), quiet());
  TrainingResult two = run_training(config("dp_full_2", common + "gpus: 2\ngradient_accumulation_steps: 2\n"), quiet());
  expect_same_losses(one.step_losses, two.step_losses);
  ASSERT_TRUE(one.eval_loss && two.eval_loss);
  EXPECT_NEAR(*two.eval_loss, *one.eval_loss, kRelativeTolerance * *one.eval_loss);
  // The same update: after 6 steps the weights (|w| up to ~1) differ by fp32 rounding only.
  EXPECT_LT(largest_weight_difference(root_ / "dp_full_1" / "checkpoint-6" / "model.safetensors",
                                      root_ / "dp_full_2" / "checkpoint-6" / "model.safetensors"), kWeightTolerance);
  // The outputs and checkpoints are the single-rank files.
  EXPECT_EQ(tensor_names(root_ / "dp_full_2" / "model.safetensors"), tensor_names(root_ / "dp_full_1" / "model.safetensors"));
  EXPECT_EQ(tensor_names(root_ / "dp_full_2" / "checkpoint-6" / "optimizer.safetensors"),
            tensor_names(root_ / "dp_full_1" / "checkpoint-6" / "optimizer.safetensors"));
}

// AdamW with fp32 moments: with adamw_8bit a last-bit difference in a gradient can move a moment
// to the neighbouring 8-bit code, a step of up to lr × a few % (measured 2e-4 here); the 8-bit
// state is covered by the resume test below.
TEST_F(DataParallelTest, ThreeRanksLoraWithDropoutMatchOneRank) {
  const std::string common = "max_steps: 5\nlora: true\nlora_rank: 4\nlora_dropout: 0.05\noptimizer: adamw\n"
                             "learning_rate: 1e-2\nper_device_train_batch_size: 2\n";
  TrainingResult one = run_training(config("dp_lora_1", common + "gradient_accumulation_steps: 3\n"), quiet());
  TrainingResult three = run_training(config("dp_lora_3", common + "gpus: 3\ngradient_accumulation_steps: 1\n"), quiet());
  expect_same_losses(one.step_losses, three.step_losses);
  EXPECT_LT(largest_weight_difference(root_ / "dp_lora_1" / "checkpoint-5" / "model.safetensors",
                                      root_ / "dp_lora_3" / "checkpoint-5" / "model.safetensors"), kWeightTolerance);
  EXPECT_EQ(tensor_names(root_ / "dp_lora_3" / "adapter_model.safetensors"),
            tensor_names(root_ / "dp_lora_1" / "adapter_model.safetensors"));
  EXPECT_EQ(tensor_names(root_ / "dp_lora_3" / "checkpoint-5" / "optimizer.safetensors"),
            tensor_names(root_ / "dp_lora_1" / "checkpoint-5" / "optimizer.safetensors"));
}

// ZeRO-1 and ZeRO-2: the gradients reduce-scattered (each rank receives only its shard's sums: three
// uneven shards), the grad norm the sum of the shards' squares — the one each step logs and
// clips by; clipping active (max_grad_norm 0.5) so the norm's value matters. A rank counting
// another shard, or one shard left out, changes the logged norm by far more than the tolerance.
TEST_F(DataParallelTest, ZeroOneAndTwoOnThreeRanksMatchOneRankAndItsGradNorms) {
  const std::string common = "max_steps: 5\noptimizer: adamw\nmax_grad_norm: 0.5\nper_device_train_batch_size: 2\n";
  TrainingResult one = run_training(config("dp_zero_1", common + "gradient_accumulation_steps: 3\n"), quiet());
  const std::vector<double> one_norms = grad_norms(one);
  ASSERT_EQ(one_norms.size(), 5u);
  EXPECT_GT(one_norms.front(), 0.5) << "clipping must be active for the norm to matter";
  for (const std::string zero : {"1", "2"}) {
    SCOPED_TRACE("zero_level: " + zero);
    const std::string run = "dp_zero" + zero + "_3";
    TrainingResult three = run_training(
        config(run, common + "gpus: 3\nzero_level: " + zero + "\ngradient_accumulation_steps: 1\n"), quiet());
    expect_same_losses(one.step_losses, three.step_losses);
    const std::vector<double> norms = grad_norms(three);
    ASSERT_EQ(norms.size(), one_norms.size());
    for (size_t i = 0; i < norms.size(); ++i) {
      EXPECT_NEAR(norms[i], one_norms[i], kRelativeTolerance * one_norms[i]) << "step " << i + 1;
    }
    EXPECT_LT(largest_weight_difference(root_ / "dp_zero_1" / "checkpoint-5" / "model.safetensors",
                                        root_ / run / "checkpoint-5" / "model.safetensors"), kWeightTolerance);
  }
}

TEST_F(DataParallelTest, TwoRanksPretrainingWithNorMuonMatchOneRank) {
  const std::string common = "max_steps: 5\noptimizer: normuon\nlearning_rate: 1e-2\n";
  TrainingResult one = run_training(config("dp_pt_1", common + "gradient_accumulation_steps: 2\n", true), quiet(true));
  TrainingResult two = run_training(config("dp_pt_2", common + "gpus: 2\ngradient_accumulation_steps: 1\n", true), quiet(true));
  expect_same_losses(one.step_losses, two.step_losses);
}

TEST_F(DataParallelTest, Fp8RanksShareTheScalingStateAndMatchOneRank) {
  const std::string common = "optimizer: adamw\nrecipe: fp8_hybrid\n";
  const std::string one_step = "max_steps: 1\nsave_steps: 1\nwarmup_steps: 0\n";
  run_training(config("dp_fp8_step_1", common + one_step + "gradient_accumulation_steps: 4\n"), quiet());
  run_training(config("dp_fp8_step_4", common + one_step + "gpus: 4\ngradient_accumulation_steps: 1\n"), quiet());
  io::SafetensorsFile a = io::SafetensorsFile::open(root_ / "dp_fp8_step_1" / "checkpoint-1" / "optimizer.safetensors");
  io::SafetensorsFile b = io::SafetensorsFile::open(root_ / "dp_fp8_step_4" / "checkpoint-1" / "optimizer.safetensors");
  const io::SafetensorsTensor& one_rank = a.tensor("fp8.scaling");
  const io::SafetensorsTensor& four_ranks = b.tensor("fp8.scaling");
  ASSERT_EQ(one_rank.bytes.size(), four_ranks.bytes.size());
  EXPECT_EQ(std::memcmp(one_rank.bytes.data(), four_ranks.bytes.data(), one_rank.bytes.size()), 0)
      << "the ranks' amaxes are not all-reduced before the roll";

  TrainingResult one = run_training(config("dp_fp8_1", common + "max_steps: 6\ngradient_accumulation_steps: 4\n"), quiet());
  TrainingResult two =
      run_training(config("dp_fp8_2", common + "max_steps: 6\ngpus: 2\ngradient_accumulation_steps: 2\n"), quiet());
  expect_same_losses(one.step_losses, two.step_losses);
  EXPECT_LT(largest_weight_difference(root_ / "dp_fp8_1" / "checkpoint-6" / "model.safetensors",
                                      root_ / "dp_fp8_2" / "checkpoint-6" / "model.safetensors"), kWeightTolerance);
}

TEST_F(DataParallelTest, ThreeRanksFp8LoraMatchOneRankAndResumeExactly) {
  const std::string common = "max_steps: 6\nsave_steps: 3\nlora: true\nlora_rank: 4\nlora_dropout: 0.0\n"
                             "optimizer: adamw\nlearning_rate: 1e-2\nper_device_train_batch_size: 2\nrecipe: fp8_hybrid\n";
  TrainingResult one = run_training(config("dp_fp8_lora_1", common + "gradient_accumulation_steps: 3\n"), quiet());
  const std::string three_ranks = common + "gpus: 3\ngradient_accumulation_steps: 1\n";
  TrainingResult three = run_training(config("dp_fp8_lora_3", three_ranks), quiet());
  expect_same_losses(one.step_losses, three.step_losses);

  TrainerOptions interrupted = quiet();
  interrupted.stop_after_step = 3;
  ASSERT_EQ(run_training(config("dp_fp8_lora_resumed", three_ranks), interrupted).step_losses.size(), 3u);
  TrainingResult resumed =
      run_training(config("dp_fp8_lora_resumed", three_ranks + "resume_from_checkpoint: true\n"), quiet());
  ASSERT_EQ(resumed.step_losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(resumed.step_losses[i], three.step_losses[3 + i]) << "step " << i + 4;
}

TEST_F(DataParallelTest, ZeroThreeFullFineTuningOnThreeRanksMatchesOneRank) {
  const std::string common = "max_steps: 5\noptimizer: adamw\nmax_grad_norm: 0.5\nper_device_train_batch_size: 2\n";
  TrainingResult one = run_training(config("dp_zero3_1", common + "gradient_accumulation_steps: 3\n"), quiet());
  TrainingResult three = run_training(
      config("dp_zero3_3", common + "gpus: 3\nzero_level: 3\ngradient_accumulation_steps: 1\n"), small_buckets());
  expect_same_losses(one.step_losses, three.step_losses);
  ASSERT_TRUE(one.eval_loss && three.eval_loss);  // the evaluator reads the weights gathered to the host
  EXPECT_NEAR(*three.eval_loss, *one.eval_loss, kRelativeTolerance * *one.eval_loss);
  EXPECT_LT(largest_weight_difference(root_ / "dp_zero3_1" / "checkpoint-5" / "model.safetensors",
                                      root_ / "dp_zero3_3" / "checkpoint-5" / "model.safetensors"), kWeightTolerance);
  EXPECT_LT(largest_weight_difference(root_ / "dp_zero3_1" / "model.safetensors",
                                      root_ / "dp_zero3_3" / "model.safetensors"), kWeightTolerance);
  EXPECT_EQ(tensor_names(root_ / "dp_zero3_3" / "checkpoint-5" / "optimizer.safetensors"),
            tensor_names(root_ / "dp_zero3_1" / "checkpoint-5" / "optimizer.safetensors"));
}

TEST_F(DataParallelTest, ZeroThreeLoraWithDropoutOnTwoRanksMatchesOneRank) {
  // The frozen base is sharded too: each rank keeps half of it.
  const std::string common = "max_steps: 5\nlora: true\nlora_rank: 4\nlora_dropout: 0.05\noptimizer: adamw\n"
                             "learning_rate: 1e-2\nper_device_train_batch_size: 2\n";
  TrainingResult one = run_training(config("dp_zero3_lora_1", common + "gradient_accumulation_steps: 4\n"), quiet());
  TrainingResult two = run_training(
      config("dp_zero3_lora_2", common + "gpus: 2\nzero_level: 3\ngradient_accumulation_steps: 2\n"), small_buckets());
  expect_same_losses(one.step_losses, two.step_losses);
  EXPECT_LT(largest_weight_difference(root_ / "dp_zero3_lora_1" / "adapter_model.safetensors",
                                      root_ / "dp_zero3_lora_2" / "adapter_model.safetensors"), kWeightTolerance);
  EXPECT_EQ(tensor_names(root_ / "dp_zero3_lora_2" / "adapter_model.safetensors"),
            tensor_names(root_ / "dp_zero3_lora_1" / "adapter_model.safetensors"));
}

TEST_F(DataParallelTest, ZeroThreePretrainingWithNorMuonMatchesOneRank) {
  const std::string common = "max_steps: 5\noptimizer: normuon\nlearning_rate: 1e-2\n";
  TrainingResult one = run_training(config("dp_zero3_pt_1", common + "gradient_accumulation_steps: 2\n", true), quiet(true));
  TrainingResult two = run_training(
      config("dp_zero3_pt_2", common + "gpus: 2\nshard_weights: true\ngradient_accumulation_steps: 1\n", true),
      small_buckets(true));
  expect_same_losses(one.step_losses, two.step_losses);
}

TEST_F(DataParallelTest, ZeroThreeResumesExactlyOnItsWorldSizeAndContinuesOnAnother) {
  const std::string common = "max_steps: 8\nsave_steps: 4\noptimizer: adamw_8bit\n";
  const std::string two_ranks = common + "gpus: 2\nzero_level: 3\ngradient_accumulation_steps: 3\n";
  TrainingResult straight = run_training(config("dp_zero3_straight", two_ranks), small_buckets());
  ASSERT_EQ(straight.step_losses.size(), 8u);
  TrainerOptions interrupted = small_buckets();
  interrupted.stop_after_step = 4;
  ASSERT_EQ(run_training(config("dp_zero3_resumed", two_ranks), interrupted).step_losses.size(), 4u);
  TrainingResult resumed =
      run_training(config("dp_zero3_resumed", two_ranks + "resume_from_checkpoint: true\n"), small_buckets());
  expect_continues(resumed, straight, 4, 0.0);

  // The same checkpoint continued on three ZeRO-3 ranks and on one rank, with the same global batch.
  const std::vector<std::pair<std::string, std::string>> continuations = {
      {"dp_zero3_on_3", "gpus: 3\nzero_level: 3\ngradient_accumulation_steps: 2\n"},
      {"dp_zero3_on_1", "gradient_accumulation_steps: 6\n"}};
  for (const auto& [name, world] : continuations) {
    SCOPED_TRACE(name);
    copy_checkpoint("dp_zero3_resumed", name, "checkpoint-4");
    TrainingResult continued = run_training(config(name, common + world + "resume_from_checkpoint: true\n"), small_buckets());
    ASSERT_EQ(continued.first_step, 4);
    expect_same_losses(std::vector<double>(straight.step_losses.begin() + 4, straight.step_losses.end()),
                       continued.step_losses);
  }
}

TEST_F(DataParallelTest, SmallGradientBucketsGiveTwoRanksExactlyWhatOneBucketGives) {
  for (const std::string zero : {"zero_level: 1\n", "zero_level: 2\n"}) {
    SCOPED_TRACE(zero);
    const std::string job = "max_steps: 4\nsave_steps: 4\noptimizer: adamw\nmax_grad_norm: 0.5\ngpus: 2\n"
                            "gradient_accumulation_steps: 2\n" + zero;
    const std::string tag = zero.substr(12, 1);
    TrainingResult one_bucket = run_training(config("dp_one_bucket_z" + tag, job), quiet());
    TrainingResult buckets = run_training(config("dp_buckets_z" + tag, job), small_buckets());
    EXPECT_EQ(one_bucket.step_losses, buckets.step_losses);
    EXPECT_EQ(largest_weight_difference(root_ / ("dp_one_bucket_z" + tag) / "checkpoint-4" / "model.safetensors",
                                        root_ / ("dp_buckets_z" + tag) / "checkpoint-4" / "model.safetensors"),
              0.0);
  }
}

// ZeRO-2/3 keep gradient accumulators for the rank's shard only (sharded_gradients.h): with 3 ranks
// a rank's accumulators and its bucket staging are about a third of ZeRO-1's full-size ones.
// Shards are whole tensors (an even share, give or take one tensor: the quickstart model's largest
// is under a tenth of it), and the staging is one bucket of at most 2 × 4 KiB; ZeRO-1 and a world
// of one keep every tensor's. The losses of the three levels stay within the stated tolerance.
TEST_F(DataParallelTest, ZeroTwoAndThreeShrinkEachRanksGradientAccumulators) {
  const std::string job = "max_steps: 2\nwarmup_steps: 1\noptimizer: adamw\ngpus: 3\ngradient_accumulation_steps: 2\n";
  std::map<std::string, TrainingResult> results;
  for (const std::string zero : {"1", "2", "3"}) {
    results[zero] = run_training(config("dp_accumulators_z" + zero, job + "zero_level: " + zero + "\n"), small_buckets());
  }
  size_t trainable = 0;
  io::SafetensorsFile model = io::SafetensorsFile::open(root_ / "dp_accumulators_z1" / "model.safetensors");
  for (const io::SafetensorsTensor& tensor : model.tensors()) trainable += tensor.bytes.size();
  const size_t zero1 = results["1"].gradient_accumulator_bytes;
  EXPECT_EQ(zero1, trainable) << "ZeRO-1: every trainable tensor's fp32 accumulator";
  for (const std::string zero : {"2", "3"}) {
    const size_t sharded = results[zero].gradient_accumulator_bytes;
    fmt::print("ZeRO-{}: {} bytes of accumulators per rank, ZeRO-1 {} ({:.3f})\n", zero, sharded, zero1,
               static_cast<double>(sharded) / static_cast<double>(zero1));
    EXPECT_GT(sharded, zero1 / 3) << "ZeRO-" << zero;
    EXPECT_LT(sharded, zero1 / 3 + zero1 / 10 + 2 * 4096) << "ZeRO-" << zero;
    expect_same_losses(results["1"].step_losses, results[zero].step_losses);
  }
}

// The data-parallel device with a world of one (its rank thread, the gloo collectives on one
// rank, the flat buffers; under ZeRO-3 the gathers of its own weights) against the plain CPU
// device: tolerance none for ZeRO-1, 2 and 3 (sums over one rank leave the buffers as they are,
// a gather over one rank copies its weights, and the optimizers see the same gradients).
class CpuWorldOfOneTest : public TrainerFixture {};

TEST_F(CpuWorldOfOneTest, TheDataParallelDeviceWithOneRankEqualsThePlainDevice) {
  for (const std::string zero : {"zero_level: 1\n", "zero_level: 2\n", "zero_level: 3\n"}) {
    SCOPED_TRACE(zero);
    const std::string extra = "max_steps: 4\nsave_steps: 4\noptimizer: adamw\nmax_grad_norm: 0.5\n" + zero;
    TrainerOptions plain = quiet(), one = quiet();
    plain.backend = one.backend = TrainingBackend::Cpu;
    one.data_parallel_device = true;
    one.gradient_bucket_bytes = 4096;
    const std::string tag = zero.substr(12, 1);
    TrainingResult a = run_training(config("plain-z" + tag, extra), plain);
    TrainingResult b = run_training(config("world-of-one-z" + tag, extra), one);
    ASSERT_EQ(a.step_losses.size(), b.step_losses.size());
    for (size_t i = 0; i < a.step_losses.size(); ++i) EXPECT_EQ(a.step_losses[i], b.step_losses[i]) << "step " << i + 1;
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      io::SafetensorsFile x = io::SafetensorsFile::open(root_ / ("plain-z" + tag) / "checkpoint-4" / file);
      io::SafetensorsFile y = io::SafetensorsFile::open(root_ / ("world-of-one-z" + tag) / "checkpoint-4" / file);
      for (const io::SafetensorsTensor& tensor : x.tensors()) {
        const io::SafetensorsTensor& other = y.tensor(tensor.name);
        ASSERT_EQ(tensor.bytes.size(), other.bytes.size()) << tensor.name;
        EXPECT_EQ(std::memcmp(tensor.bytes.data(), other.bytes.data(), tensor.bytes.size()), 0) << tensor.name;
      }
    }
  }
}

TEST_F(DataParallelTest, ResumeOnTheSameWorldSizeIsExactAndAnotherWorldSizeContinues) {
  const std::string extra = "max_steps: 8\nsave_steps: 4\noptimizer: adamw_8bit\ngpus: 2\ngradient_accumulation_steps: 1\n";
  TrainingResult straight = run_training(config("dp_straight", extra), quiet());
  ASSERT_EQ(straight.step_losses.size(), 8u);

  TrainerOptions interrupted = quiet();
  interrupted.stop_after_step = 4;
  ASSERT_EQ(run_training(config("dp_resumed", extra), interrupted).step_losses.size(), 4u);
  TrainingResult resumed = run_training(config("dp_resumed", extra + "resume_from_checkpoint: true\n"), quiet());
  expect_continues(resumed, straight, 4, 0.0);

  // The same checkpoint continued by one rank with the same global batch (accumulation 2).
  copy_checkpoint("dp_resumed", "dp_one_rank", "checkpoint-4");
  TrainingResult one_rank = run_training(
      config("dp_one_rank", "max_steps: 8\nsave_steps: 4\noptimizer: adamw_8bit\ngradient_accumulation_steps: 2\n"
                            "resume_from_checkpoint: true\n"),
      quiet());
  ASSERT_EQ(one_rank.first_step, 4);
  expect_same_losses(std::vector<double>(straight.step_losses.begin() + 4, straight.step_losses.end()), one_rank.step_losses);
}

}  // namespace
}  // namespace surogate::train
