// The pieces of sequence and pipeline parallelism, each against a plain computation: the layout's
// rank coordinates and its refusals; gloo's all-to-all, point-to-point transfers and groups; the
// exchange ops as a permutation (sequence_to_heads, then heads_to_sequence, gives the input back
// bit for bit, and each chunk lands where Ulysses puts it); the 1F1B schedule (each micro-batch
// once each way, at most P − s in flight, and a simulated step time equal to the bubble formula
// (M + P − 1)(f + b) for every P, M, f, b tried); the rounds of grouped transfers, replayed against a
// model of rendezvous transfers (they finish for every P ≤ 8, M ≤ 16, with and without a tensor
// that skips stages, where each step's own blocking transfers deadlock); the stage balancing; the sequence-parallel pass
// and the pipeline split on a small decoder graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "compiler/recompute_choice.h"
#include "config/config.h"
#include "core/error.h"
#include "distributed/gloo_communicator.h"
#include "distributed/parallel_layout.h"
#include "distributed/pipeline_graph.h"
#include "distributed/pipeline_rounds.h"
#include "distributed/pipeline_schedule.h"
#include "distributed/pipeline_stages.h"
#include "distributed/rank_threads.h"
#include "distributed/sequence_exchange_ops.h"
#include "distributed/sequence_parallel_graph.h"
#include "graph/builder.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "runtime/cpu_backend.h"
#include "compiler/execution_plan.h"
#include "user_error_of.h"
#include "gloo_world_fixture.h"

namespace surogate::distributed {
namespace {

TEST(ModelParallelLayout, RanksAreSequenceThenReplicaThenStage) {
  Config config;
  config.parallel.gpus = 8;
  config.parallel.sequence_parallel_size = 2;
  ParallelLayout layout = cpu_parallel_layout(config);
  EXPECT_EQ(layout.data_size, 4);
  EXPECT_EQ(layout.sequence_size, 2);
  EXPECT_EQ(layout.gradient_group_size(), 8);
  EXPECT_EQ(layout.describe(), "8 ranks (4 data-parallel × 2 sequence-parallel), ZeRO-1 (optimizer state sharded)");
  for (int rank = 0; rank < 8; ++rank) {
    const RankPlace place = layout.place(rank);
    EXPECT_EQ(place.sequence, rank % 2);
    EXPECT_EQ(place.replica, rank / 2);
    EXPECT_EQ(layout.rank_at(place), rank);
  }
  config.parallel.sequence_parallel_size = 1;
  config.parallel.pipeline_parallel_size = 4;
  layout = cpu_parallel_layout(config);
  EXPECT_EQ(layout.data_size, 2);
  EXPECT_EQ(layout.gradient_group_size(), 2);
  EXPECT_EQ(layout.place(5).stage, 2);
  EXPECT_EQ(layout.place(5).replica, 1);
  EXPECT_EQ(layout.describe(), "8 ranks (2 data-parallel × 4 pipeline stages), ZeRO-1 (optimizer state sharded)");
  config.parallel.gpus = 6;
  EXPECT_NE(error_of([&] { cpu_parallel_layout(config); })
                .find("pipeline_parallel_size: 4 needs the ranks to be a multiple of 4, but this run has 6 ranks"),
            std::string::npos);
  config.parallel.gpus = 4;
  config.parallel.pipeline_parallel_size = 4;
  EXPECT_EQ(cpu_parallel_layout(config).describe(), "4 ranks (4 pipeline stages)");
}

class GlooPieces : public GlooWorld {};

TEST_P(GlooPieces, AllToAllSendsChunkRToRankR) {
  const size_t chunk = 1001;
  std::vector<std::vector<float>> input(world()), output(world());
  for (int rank = 0; rank < world(); ++rank) {
    for (int to = 0; to < world(); ++to) {
      for (size_t i = 0; i < chunk; ++i) input[rank].push_back(static_cast<float>(rank * 1000000 + to * 10000 + static_cast<int>(i)));
    }
    output[rank].assign(input[rank].size(), -1.0f);
  }
  threads_->run([&](int rank) { communicators_[rank]->all_to_all(input[rank].data(), output[rank].data(), chunk, DType::F32); });
  for (int rank = 0; rank < world(); ++rank) {
    for (int from = 0; from < world(); ++from) {
      for (size_t i = 0; i < chunk; ++i) {
        ASSERT_EQ(output[rank][from * chunk + i], static_cast<float>(from * 1000000 + rank * 10000 + static_cast<int>(i)));
      }
    }
  }
}

TEST_P(GlooPieces, PointToPointMatchesByPeerAndTagWhateverTheOrder) {
  // Every rank sends two tagged messages to every other rank, receiving them in the reverse tag order.
  std::vector<std::map<std::pair<int, int>, std::vector<float>>> sent(world()), received(world());
  threads_->run([&](int rank) {
    for (int peer = 0; peer < world(); ++peer) {
      if (peer == rank) continue;
      for (int tag = 0; tag < 2; ++tag) {
        sent[rank][{peer, tag}] = std::vector<float>(257, static_cast<float>(rank * 100 + peer * 10 + tag));
        const std::vector<float>& message = sent[rank][{peer, tag}];
        communicators_[rank]->send(message.data(), message.size(), DType::F32, peer, static_cast<uint32_t>(tag));
      }
    }
    for (int peer = 0; peer < world(); ++peer) {
      if (peer == rank) continue;
      for (int tag = 1; tag >= 0; --tag) {
        std::vector<float>& message = received[rank][{peer, tag}];
        message.assign(257, 0.0f);
        communicators_[rank]->receive(message.data(), message.size(), DType::F32, peer, static_cast<uint32_t>(tag));
      }
    }
    communicators_[rank]->wait_sends();
  });
  for (int rank = 0; rank < world(); ++rank) {
    for (const auto& [key, message] : received[rank]) {
      EXPECT_EQ(message, sent[key.first].at({rank, key.second}));
    }
  }
}

TEST_P(GlooPieces, GroupsConnectTheRanksTheyName) {
  // Groups of the even and the odd ranks; a sum within each.
  std::unique_ptr<ProcessWorld> alone = ProcessWorld::single();
  auto groups = connect_gloo_groups(*threads_, *alone, 0, [&](int rank) {
    const int size = (world() - rank % 2 + 1) / 2;
    return RankGroup{rank % 2 == 0 ? "even" : "odd", rank / 2, size};
  });
  std::vector<float> values(world());
  threads_->run([&](int rank) {
    values[rank] = static_cast<float>(rank + 1);
    groups[rank]->all_reduce_sum(&values[rank], 1, DType::F32);
  });
  for (int rank = 0; rank < world(); ++rank) {
    float expected = 0.0f;
    for (int other = rank % 2; other < world(); other += 2) expected += static_cast<float>(other + 1);
    EXPECT_EQ(values[rank], expected) << "rank " << rank;
  }
}

// sequence_to_heads on each rank's [B, T/N, H·D] slice: rank r gets every token of heads
// [r·H/N, (r+1)·H/N); heads_to_sequence gives each rank its slice back.
TEST_P(GlooPieces, ExchangeOpsMoveTokensForHeadsAndBack) {
  const int ranks = world();
  const int64_t batch = 2, tokens = 3 * ranks, heads = 2 * ranks, dim = 3, local = tokens / ranks;
  auto full_value = [&](int64_t b, int64_t t, int64_t h, int64_t d) {
    return static_cast<float>(((b * tokens + t) * heads + h) * dim + d);
  };
  std::vector<std::unique_ptr<graph::OpRegistry>> registries;
  std::vector<compiler::ExecutionPlan> plans(ranks);
  std::vector<runtime::CpuBackend> backends(ranks);
  graph::TensorId input = 0, gathered = 0, back = 0;
  for (int rank = 0; rank < ranks; ++rank) {
    registries.push_back(std::make_unique<graph::OpRegistry>());
    graph::register_core_ops(*registries.back());
    register_sequence_exchange_ops(*registries.back(), communicators_[rank].get());
    graph::GraphBuilder b(*registries.back());
    input = b.input("x", DType::F32, {batch, local, heads * dim});
    const nlohmann::json attrs{{"ranks", ranks}, {"heads", heads}, {"head_dim", dim}};
    gathered = b.op(kSequenceToHeads, {input}, attrs, "heads");
    back = b.op(kHeadsToSequence, {gathered}, attrs, "tokens");
    b.mark_output(gathered);
    b.mark_output(back);
    plans[rank] = compiler::compile_forward(b.finish(), *registries.back());
    backends[rank].load(plans[rank], *registries.back());
  }
  std::vector<std::vector<float>> slices(ranks);
  for (int rank = 0; rank < ranks; ++rank) {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < local; ++t)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t d = 0; d < dim; ++d) slices[rank].push_back(full_value(b, rank * local + t, h, d));
  }
  threads_->run([&](int rank) {
    const runtime::InputBinding binding{input, std::as_bytes(std::span<const float>(slices[rank]))};
    backends[rank].execute(std::span<const runtime::InputBinding>(&binding, 1));
  });
  const int64_t group = heads / ranks;
  for (int rank = 0; rank < ranks; ++rank) {
    const std::span<float> heads_view = backends[rank].view<float>(gathered);
    size_t at = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t h = 0; h < group; ++h)
          for (int64_t d = 0; d < dim; ++d) ASSERT_EQ(heads_view[at++], full_value(b, t, rank * group + h, d)) << rank;
    const std::span<float> slice = backends[rank].view<float>(back);
    EXPECT_TRUE(std::equal(slice.begin(), slice.end(), slices[rank].begin())) << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, GlooPieces, ::testing::Values(2, 4));

TEST(PipelineSchedule, EachMicroBatchOnceEachWayWithBoundedInFlight) {
  for (int stages : {1, 2, 3, 4}) {
    for (int micro : {1, 2, 3, 4, 8}) {
      for (int stage = 0; stage < stages; ++stage) {
        const std::vector<PipelineStep> steps = one_forward_one_backward(stage, stages, micro);
        std::set<int> forwards, backwards;
        int in_flight = 0, most = 0;
        for (const PipelineStep& step : steps) {
          if (step.kind == PipelineStep::Kind::Forward) {
            EXPECT_TRUE(forwards.insert(step.micro_batch).second);
            most = std::max(most, ++in_flight);
          } else {
            EXPECT_TRUE(forwards.contains(step.micro_batch)) << "a backward before its forward";
            EXPECT_TRUE(backwards.insert(step.micro_batch).second);
            --in_flight;
          }
        }
        EXPECT_EQ(static_cast<int>(forwards.size()), micro);
        EXPECT_EQ(static_cast<int>(backwards.size()), micro);
        EXPECT_LE(most, std::min(stages - stage, micro));
      }
    }
  }
}

TEST(PipelineSchedule, StepTimeIsTheBubbleFormula) {
  for (int stages : {1, 2, 4, 8}) {
    for (int micro : {1, 4, 8, 16}) {
      for (auto [f, b] : {std::pair{1.0, 2.0}, std::pair{1.0, 1.0}, std::pair{2.0, 3.0}}) {
        const double time = simulate_pipeline(stages, micro, f, b);
        EXPECT_DOUBLE_EQ(time, (micro + stages - 1) * (f + b)) << stages << " stages, " << micro << " micro-batches";
        // Each stage works micro · (f + b) of it: the idle share is the bubble fraction.
        EXPECT_NEAR(1.0 - micro * (f + b) / time, pipeline_bubble_fraction(stages, micro), 1e-12);
      }
    }
  }
}

TEST(PipelineStages, BalancedByCostWithTheEmbeddingAndHeadOnTheEnds) {
  LayerCosts costs{std::vector<double>(8, 1.0), 0.0, 0.0};
  std::vector<StageLayers> stages = balance_stages(costs, 4);
  ASSERT_EQ(stages.size(), 4u);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(stages[s].count(), 2) << s;
  // A heavy head (the LM head of a large vocabulary) leaves the last stage fewer layers.
  costs.after = 3.5;
  stages = balance_stages(costs, 2);
  EXPECT_EQ(stages[0].count(), 6);
  EXPECT_EQ(stages[1].count(), 2);
  EXPECT_EQ(describe_stages(stages), "layers 0–5 | 6–7");
  EXPECT_EQ(layer_of("layers.12.attn.q"), 12);
  EXPECT_EQ(layer_of("layers.x"), -1);
  EXPECT_EQ(layer_of("final_norm"), -1);

  Config config;
  config.parallel.pipeline_parallel_size = 2;
  config.parallel.pipeline_stage_layers = {3, 4};
  EXPECT_NE(error_of([&] { choose_stages(config.parallel, config.sources, costs); })
                .find("pipeline_stage_layers gives the stages 7 layers in all (3 + 4), but the model has 8"),
            std::string::npos);
  config.parallel.pipeline_stage_layers = {3, 5};
  stages = choose_stages(config.parallel, config.sources, costs);
  EXPECT_EQ(stages[1].first, 3);
  config.parallel.pipeline_parallel_size = 9;
  config.parallel.pipeline_stage_layers.clear();
  EXPECT_NE(error_of([&] {
              choose_stages(config.parallel, config.sources, costs);
            }).find("needs at least one layer per stage"),
            std::string::npos);
}

// A toy "decoder": embedding-like product, two layers of a residual product, and a loss; the
// batch-only tensor (a scaled copy of an input) is read by both layers.
struct ToyGraph {
  graph::OpRegistry registry;
  graph::Graph graph;
  graph::TensorId loss = graph::kNoTensor;
};

ToyGraph toy_graph() {
  ToyGraph toy;
  graph::register_core_ops(toy.registry);
  register_sequence_exchange_ops(toy.registry, nullptr);
  graph::GraphBuilder b(toy.registry);
  const graph::TensorId x = b.input("x", DType::F32, {2, 4});
  const graph::TensorId embed = b.parameter("embed.weight", DType::F32, {2, 4});
  graph::TensorId hidden = b.op("mul", {x, embed}, nlohmann::json::object(), "embed");
  const graph::TensorId table = b.op("scale", {x}, {{"factor", 0.5}}, "table");
  for (int layer = 0; layer < 2; ++layer) {
    auto scope = b.scope("layers." + std::to_string(layer));
    const graph::TensorId weight = b.parameter("layers." + std::to_string(layer) + ".w", DType::F32, {2, 4});
    const graph::TensorId product = b.op("mul", {hidden, weight}, nlohmann::json::object(), "product");
    const graph::TensorId with_table = b.op("mul", {product, table}, nlohmann::json::object(), "with_table");
    hidden = b.op("add", {hidden, with_table}, nlohmann::json::object(), "out");
  }
  const graph::TensorId tied = b.op("mul", {hidden, embed}, nlohmann::json::object(), "head");
  toy.loss = b.op("sum", {tied}, nlohmann::json::object(), "loss");
  b.mark_output(toy.loss);
  toy.graph = b.finish();
  return toy;
}

TEST(PipelineGraph, StagesSendTheStreamRecomputeBatchTensorsAndShareTiedWeights) {
  ToyGraph toy = toy_graph();
  const std::vector<StageLayers> layers = {{0, 1}, {1, 2}};
  const std::vector<StageGraph> stages = split_pipeline_stages(toy.graph, toy.loss, toy.registry, layers);
  ASSERT_EQ(stages.size(), 2u);
  // Stage 0 sends layer 0's output; the batch-only table is computed again in stage 1, not sent.
  ASSERT_EQ(stages[0].sent.size(), 1u);
  EXPECT_EQ(stages[0].sent[0].name, "layers.0.out");
  EXPECT_EQ(stages[0].sent[0].to, std::vector<int>{1});
  ASSERT_EQ(stages[1].received.size(), 1u);
  EXPECT_EQ(stages[1].received[0].name, "layers.0.out");
  EXPECT_TRUE(stages[1].training.find_tensor("table").has_value());
  // The received tensor is a trainable parameter of the training graph, an input of nothing else.
  const graph::TensorInfo& received = stages[1].training.tensor(*stages[1].training.find_tensor("layers.0.out"));
  EXPECT_EQ(received.role, graph::TensorRole::Parameter);
  EXPECT_TRUE(received.trainable);
  // Tied: both stages read embed.weight.
  EXPECT_TRUE(stages[0].training.find_tensor("embed.weight").has_value());
  EXPECT_TRUE(stages[1].training.find_tensor("embed.weight").has_value());
  // Stage 0's loss reads the gradient input of what it sends; its forward graph outputs it.
  EXPECT_TRUE(stages[0].training.find_tensor(std::string("layers.0.out") + kPipelineGradSuffix).has_value());
  EXPECT_EQ(stages[0].forward.tensor(stages[0].forward.outputs.at(0)).name, "layers.0.out");
  EXPECT_TRUE(stages[1].forward.nodes.empty());
  EXPECT_EQ(stages[1].training.tensor(stages[1].loss).name, "loss");
}

// A stage's recompute choice counts the stage's own layers (layer 1 of 2 here), not the model's.
TEST(PipelineGraph, AStagesRecomputeChoiceCountsItsOwnLayers) {
  ToyGraph toy = toy_graph();
  const std::vector<StageLayers> layers = {{0, 1}, {1, 2}};
  const std::vector<StageGraph> stages = split_pipeline_stages(toy.graph, toy.loss, toy.registry, layers);
  ASSERT_EQ(stages.size(), 2u);
  const compiler::CompileOptions options{.recompute = compiler::RecomputePolicy::all()};
  for (int stage = 0; stage < 2; ++stage) {
    compiler::RecomputeChoice choice;
    int compiled = 0;  // everything but the plan that recomputes nothing fits
    compiler::compile_training_to_fit(stages[stage].training, stages[stage].loss, toy.registry, options, 2, false,
                                      [&](const compiler::ExecutionPlan&) { return compiled++ > 0; }, &choice);
    EXPECT_EQ(choice.layers, 1) << "stage " << stage;
    EXPECT_EQ(choice.policy.keep_expensive_layers, stage + 1) << "stage " << stage;
    EXPECT_NE(choice.summary.find("kept in all 1 layers"), std::string::npos) << choice.summary;
  }
}

TEST(SequenceParallelGraph, TokenInputsSplitAndAttentionIsWrapped) {
  // A minimal attention graph: q, k, v projections of the input, attention with document ids.
  graph::OpRegistry registry;
  graph::register_core_ops(registry);
  register_sequence_exchange_ops(registry, nullptr);
  graph::OpDef attention{.name = "attention", .inputs = {"q", "k", "v", "document_ids"}, .outputs = {"out", "logsumexp"},
                         .infer = [](const graph::InferContext& ctx) {
                           const graph::Shape& q = ctx.input(0).shape;
                           const int64_t heads = ctx.attrs.integer("query_heads");
                           return std::vector<graph::TensorType>{ctx.input(0), {DType::F32, {q[0], heads, q[1]}}};
                         }};
  registry.add(attention);
  graph::GraphBuilder b(registry);
  const graph::TensorId q = b.input("q_in", DType::F32, {1, 8, 4 * 2});
  const graph::TensorId kv = b.input("kv_in", DType::F32, {1, 8, 2 * 2});
  const graph::TensorId documents = b.input("document_ids", DType::I32, {1, 8});
  const graph::TensorId out = b.op("attention", {b.op("scale", {q}, {{"factor", 1.0}}, "q"), kv, kv, documents},
                                   {{"query_heads", 4}, {"kv_heads", 2}, {"head_dim", 2}}, "attention");
  const graph::TensorId loss = b.op("sum", {out}, nlohmann::json::object(), "loss");
  b.mark_output(loss);
  const graph::Graph forward = b.finish();
  // sum is not a per-token op: the pass refuses it (the decoder's loss is lm_head_loss).
  EXPECT_NE(error_of([&] { apply_sequence_parallel(forward, registry, 2); }).find("node 'loss' applies 'sum'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { apply_sequence_parallel(forward, registry, 4); }).find("1/4 of the attention heads"),
            std::string::npos);
  EXPECT_NE(error_of([&] { apply_sequence_parallel(forward, registry, 3); }).find("sequence_len is 8"), std::string::npos);
}


namespace pipeline_rounds_test {

// Stage graphs of a chain of `stages` (the residual stream from each stage to the next) and, with
// `skip`, a tensor the first stage sends to the last two as well.
std::vector<StageGraph> chain(int stages, bool skip) {
  std::vector<StageGraph> graphs(static_cast<size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    graphs[static_cast<size_t>(s)].stage = s;
    if (s + 1 < stages) {
      const BoundaryTensor tensor{"h" + std::to_string(s), s, {s + 1}};
      graphs[static_cast<size_t>(s)].sent.push_back(tensor);
      graphs[static_cast<size_t>(s + 1)].received.push_back(tensor);
    }
  }
  if (skip && stages >= 3) {
    const BoundaryTensor tensor{"x", 0, {stages - 2, stages - 1}};
    graphs[0].sent.push_back(tensor);
    for (int reader : tensor.to) graphs[static_cast<size_t>(reader)].received.push_back(tensor);
  }
  return graphs;
}

// Replays the programs as NCCL runs them: a rank posts its next group once the previous one has
// completed; a group completes when each of its transfers is posted by the other rank too (in a
// group it has posted, or already completed). Returns whether every group completed.
bool completes(const std::vector<std::vector<std::vector<PipelineTransfer>>>& groups) {
  const size_t ranks = groups.size();
  std::vector<size_t> next(ranks, 0);
  auto posted_or_done = [&](size_t rank, const PipelineTransfer& transfer) {
    for (size_t g = 0; g <= next[rank] && g < groups[rank].size(); ++g) {
      if (std::find(groups[rank][g].begin(), groups[rank][g].end(), transfer) != groups[rank][g].end()) return true;
    }
    return false;
  };
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (size_t rank = 0; rank < ranks; ++rank) {
      if (next[rank] == groups[rank].size()) continue;
      bool ready = true;
      for (const PipelineTransfer& transfer : groups[rank][next[rank]]) {
        const size_t other = static_cast<size_t>(transfer.sender) == rank ? static_cast<size_t>(transfer.receiver)
                                                                           : static_cast<size_t>(transfer.sender);
        ready = ready && posted_or_done(other, transfer);
      }
      if (!ready) continue;
      ++next[rank];
      progressed = true;
    }
  }
  for (size_t rank = 0; rank < ranks; ++rank) {
    if (next[rank] != groups[rank].size()) return false;
  }
  return true;
}

// Every stage's transfers posted around each of its steps, one per group.
std::vector<std::vector<std::vector<PipelineTransfer>>> step_by_step(const std::vector<StageGraph>& graphs, int micro) {
  const int stages = static_cast<int>(graphs.size());
  std::vector<std::vector<std::vector<PipelineTransfer>>> groups(graphs.size());
  for (int s = 0; s < stages; ++s) {
    auto& own = groups[static_cast<size_t>(s)];
    const StageGraph& graph = graphs[static_cast<size_t>(s)];
    for (const PipelineStep& step : one_forward_one_backward(s, stages, micro)) {
      const int m = step.micro_batch;
      if (step.kind == PipelineStep::Kind::Forward) {
        for (const BoundaryTensor& tensor : graph.received) own.push_back({{tensor.name, m, false, tensor.from, s}});
        for (const BoundaryTensor& tensor : graph.sent) {
          for (int reader : tensor.to) own.push_back({{tensor.name, m, false, s, reader}});
        }
      } else {
        for (const BoundaryTensor& tensor : graph.sent) {
          for (int reader : tensor.to) own.push_back({{tensor.name, m, true, reader, s}});
        }
        for (const BoundaryTensor& tensor : graph.received) own.push_back({{tensor.name, m, true, s, tensor.from}});
      }
    }
  }
  return groups;
}

}  // namespace pipeline_rounds_test

TEST(PipelineRounds, GroupedTransfersNeverDeadlockAndEveryStepRunsInScheduleOrder) {
  using namespace pipeline_rounds_test;
  for (bool skip : {false, true}) {
    for (int stages = 1; stages <= 8; ++stages) {
      for (int micro = 1; micro <= 16; ++micro) {
        const std::vector<StageGraph> graphs = chain(stages, skip);
        std::vector<const StageGraph*> pointers;
        for (const StageGraph& graph : graphs) pointers.push_back(&graph);
        const auto programs = pipeline_rounds(pointers, micro);
        ASSERT_EQ(programs.size(), static_cast<size_t>(stages));
        std::vector<std::vector<std::vector<PipelineTransfer>>> grouped(programs.size());
        // Per (sender, receiver): the sends and the receives, in program order.
        std::map<std::pair<int, int>, std::vector<PipelineTransfer>> sends, receives;
        for (int s = 0; s < stages; ++s) {
          std::vector<PipelineStep> steps;
          for (const PipelineRound& round : programs[static_cast<size_t>(s)]) {
            if (round.step) steps.push_back(*round.step);
            if (!round.transfers.empty()) grouped[static_cast<size_t>(s)].push_back(round.transfers);
            for (const PipelineTransfer& transfer : round.transfers) {
              ASSERT_TRUE(transfer.sender == s || transfer.receiver == s);
              (transfer.sender == s ? sends : receives)[{transfer.sender, transfer.receiver}].push_back(transfer);
              // A stage sends what a step of this round or an earlier one computed.
              if (transfer.sender == s) {
                const PipelineStep made{transfer.gradient ? PipelineStep::Kind::Backward : PipelineStep::Kind::Forward,
                                        transfer.micro_batch};
                EXPECT_NE(std::find(steps.begin(), steps.end(), made), steps.end());
              }
            }
          }
          EXPECT_EQ(steps, one_forward_one_backward(s, stages, micro)) << "stage " << s;
        }
        // NCCL pairs a peer's sends and receives in order: both sides list the same transfers.
        EXPECT_EQ(sends, receives);
        EXPECT_TRUE(completes(grouped)) << stages << " stages, " << micro << " micro-batches, skip " << skip;
        if (stages >= 2 && micro >= 2) {
          // Each step's own transfers, one at a time (receive, compute, send), as a naive 1F1B would
          // post them: the first stage's second send and the second stage's first gradient wait
          // for each other.
          EXPECT_FALSE(completes(step_by_step(graphs, micro))) << stages << " stages, " << micro << " micro-batches";
        }
      }
    }
  }
}

}  // namespace
}  // namespace surogate::distributed
