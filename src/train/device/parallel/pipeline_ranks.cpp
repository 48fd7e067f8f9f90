// The pipeline strategy's ranks of the parallel device (parallel_device.cpp) when
// pipeline_parallel_size > 1, composed with data and sequence parallelism (docs/architecture.md,
// "Pipeline parallel"), written once for every backend. The ranks are threads of this process
// (distributed/rank_threads.h); rank r runs stage s of replica d at sequence index q
// (distributed/parallel_layout.h), a StageRankEngine (stage_ranks.h) over its backend's rank and
// its pipeline stage (pipeline_stage.h, over the backend's plans), which the backend's host side
// makes (rank_host.h: CpuRankHost on gloo, CudaRankHost on NCCL) with its communicators: the world
// for the stages' transfers, one gradient group per stage (its data × sequence ranks), one sequence
// group per stage and replica (the exchange ops of the stage's plans bind to it) and, when a
// parameter is read by the first and the last stage (tied embeddings, stepped by the first), one
// tied pair per replica and sequence index (pipeline_stage_groups.h). This class holds what does
// not depend on the backend: the tied tensors, the host copies and which rank each weight travels
// from.
//
// With sequence_parallel_size N > 1 the stages' graphs are split from the sequence slice's graph
// (train/training_plan.cpp applies distributed/sequence_parallel_graph.h before the pipeline pass),
// so every boundary tensor is a slice's [B, T/N, …]: rank q of a stage sends its slice to rank q
// of the next stage of its replica and receives its gradient from it, and the ranks of one stage's
// sequence group run the same 1F1B schedule, so their exchanges come in the same order.
//
// The host holds an fp32 copy of every parameter (weights(), trainable()): upload() writes it into
// every stage that holds each weight, download() reads each weight back from the first stage of
// replica 0 (sequence index 0) that holds it, and the evaluator reads the host copies (brought up
// to date before each evaluation), since no rank holds them all. optimizer_state() is the ranks'
// shards, whose tensors carry their parameter's name, so a checkpoint holds exactly the tensors of
// a single-rank run and resumes on any layout. Stages are rank threads of one process: a pipeline
// over the processes of a launcher or Ray is refused by the feature-support table
// (config/feature_support.cpp), as are ZeRO-3, and on GPUs bf16 masters (the masters are what the
// stages exchange), recipe fp8_hybrid and offload_residual.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/parallel/rank_host.h"
#include "train/device/parallel/stage_ranks.h"
#include "train/device/pipeline_parameters.h"

namespace surogate::train {
namespace {

class PipelineRanks final : public BackendRanks {
public:
  PipelineRanks(const RanksSetup& made, std::unique_ptr<RankHost> host)
      : layout_(made.layout), threads_(made.threads), pipeline_(*made.device.pipeline), host_(std::move(host)) {
    // Refused up front by the feature-support table, before any process loads.
    SUROGATE_CHECK(!layout_.spans_processes(), "a pipeline device over several processes");
    SUROGATE_CHECK(static_cast<int>(pipeline_.stages.size()) == layout_.pipeline_size, "one plan per stage");
    const std::set<std::string> tied = tied_pipeline_parameters(pipeline_, made.device.specs);
    for (int r = 0; r < layout_.local_ranks; ++r) engines_.push_back(std::make_unique<StageRankEngine>(layout_, r));
    try {
      host_->make_stages(made, {pipeline_, tied}, engines_);
    } catch (...) {
      host_->release();
      throw;
    }
    std::set<std::string> trainable;
    for (int r = 0; r < layout_.local_ranks; ++r) {
      for (const std::string& name : host_->stage_trainable(r)) trainable.insert(name);
    }
    host_copies_ = host_->make_host_copies(made.device.specs, trainable);
    place_host_copies();
  }

  ~PipelineRanks() override { host_->release(); }

  RankEngine& engine(int local_rank) override { return *engines_[static_cast<size_t>(local_rank)]; }

  std::string description() const override {
    return host_->description(layout_.describe() + ": " + pipeline_.describe());
  }
  std::span<const WeightView> weights() const override { return host_copies_.weights; }
  std::span<const WeightView> trainable() const override { return host_copies_.trainable; }
  bool host_views_are_live() const override { return host_->host_views_are_live(); }
  std::optional<StateTensor> fp8_state_tensor() override { return std::nullopt; }
  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    return host_->make_stage_evaluator(setup, host_copies_.weights);
  }
  // The evaluator reads the host copies.
  void before_evaluation() override { download(); }
  void store_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) override {
    host_->store_stage_quantized(weight, pieces);
  }

  void upload() override {
    threads_.run([&](int r) { host_->upload_stage(r, uploads_[static_cast<size_t>(r)]); });
  }
  // Pipeline stages keep whole weights (ZeRO-3 is refused with them).
  void download_weight_shards() override {}
  void download() override {
    threads_.run([&](int r) { host_->download_stage(r, downloads_[static_cast<size_t>(r)]); });
  }

private:
  // Each rank's views of the host copies of its stage's weights, in the rank's order; a weight
  // comes back from the first rank of the first stage that holds it (ranks are placed stage by
  // stage, each stage's gradient group's first rank first).
  void place_host_copies() {
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < host_copies_.weights.size(); ++i) index[host_copies_.weights[i].name] = i;
    std::set<std::string> downloaded;
    for (int r = 0; r < layout_.local_ranks; ++r) {
      const bool first_of_group = engines_[static_cast<size_t>(r)]->group_index == 0;
      std::vector<WeightView>& uploads = uploads_.emplace_back();
      std::vector<WeightView>& downloads = downloads_.emplace_back();
      for (const std::string& name : host_->stage_weights(r)) {
        const WeightView& host = host_copies_.weights[index.at(name)];
        uploads.push_back(host);
        // Not this rank's to download: no values.
        downloads.push_back(first_of_group && downloaded.insert(name).second ? host : WeightView{name, host.shape, {}});
      }
    }
  }

  distributed::ParallelLayout layout_;
  distributed::RankThreads& threads_;
  const PipelinePlan& pipeline_;
  std::unique_ptr<RankHost> host_;
  HostWeights host_copies_;
  std::vector<std::vector<WeightView>> uploads_, downloads_;  // each rank's, in its order
  std::vector<std::unique_ptr<StageRankEngine>> engines_;
};

}  // namespace

std::unique_ptr<BackendRanks> make_pipeline_ranks(const RanksSetup& setup, std::unique_ptr<RankHost> host) {
  return std::make_unique<PipelineRanks>(setup, std::move(host));
}

}  // namespace surogate::train
