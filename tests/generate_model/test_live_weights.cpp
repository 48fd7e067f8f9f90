// Rollouts on weights someone else loaded (generate::open_kv_cache_on_weights, what GRPO samples
// from): a forward plan with an unmerged LoRA adapter loaded on a CPU backend stands in for the
// trainer's. Greedy generation from a model reading it equals the generate command's path (the
// folder and the adapter loaded by open_kv_cache_model) token for token, and a write into the
// owner's weights is what the next feed computes with (no copy was taken).
#include <unistd.h>

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "generate/generator.h"
#include "kv_model_pair.h"
#include "models/model_definition.h"
#include "models/session_loading.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"

namespace surogate::generate {
namespace {

constexpr const char* kFixture = "llama_gqa_llama3";

// What write_random_adapter wrote: rank 4, alpha 8 on every projection.
models::LoraOptions adapter_lora() {
  models::LoraOptions lora;
  lora.rank = 4;
  lora.alpha = 8.0;
  lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return lora;
}

// The stand-in for the trainer: the model and adapter loaded into a plan of its own shape — a
// training plan (forward, backward, LoRA as the trainer applies it), or a forward plan.
struct Owner {
  graph::OpRegistry registry = ops::make_model_registry();
  models::SessionGraph session;
  compiler::ExecutionPlan plan;
  runtime::CpuBackend backend;

  explicit Owner(const std::filesystem::path& adapter, bool training = true) {
    const io::ModelConfig config = models::load_model_config(testing::fixture(kFixture), {});
    const models::DecoderGraphOptions shape{2, 8, 1, false};
    session = models::build_session_graph(config, registry, shape, {}, adapter);
    if (training && !adapter.empty()) {
      const models::DecoderGraph decoder = models::build_model_graph(config, registry, shape, {});
      graph::Graph trained = models::apply_lora(decoder.graph, registry, session.adapters, adapter_lora(), true);
      plan = compiler::compile_training(std::move(trained), decoder.loss, registry);
    } else {
      plan = compiler::compile_forward(session.graph, registry);
    }
    backend.load(plan, registry);
    models::load_session_weights(testing::fixture(kFixture), config, session, plan, backend);
  }
  LoadedWeights weights() const { return {&plan, &backend, adapter_lora()}; }
};

std::vector<GenerationRequest> greedy_requests() {
  std::vector<GenerationRequest> requests;
  for (uint32_t seed : {61u, 62u, 63u}) {
    GenerationRequest request;
    request.prompt = testing::random_tokens(5 + seed % 3, seed);
    request.max_new_tokens = 8;
    requests.push_back(request);
  }
  return requests;
}

std::vector<std::vector<int32_t>> completions(NextTokenModel& model) {
  std::vector<std::vector<int32_t>> ids;
  for (GenerationResult& result : generate(model, greedy_requests(), nullptr)) ids.push_back(result.completion_ids);
  return ids;
}

class LiveWeights : public ::testing::Test {
protected:
  void SetUp() override {
    std::filesystem::remove_all(adapter_);
    testing::write_random_adapter(adapter_, kFixture);
  }
  void TearDown() override { std::filesystem::remove_all(adapter_); }
  // One per test process: ctest runs the cases as processes of their own, side by side.
  const std::filesystem::path adapter_ = std::filesystem::temp_directory_path() / ("surogate_live_weights_adapter_" + std::to_string(::getpid()));
};

class LiveWeightsOf : public LiveWeights, public ::testing::WithParamInterface<bool> {};

TEST_P(LiveWeightsOf, GreedyRolloutsEqualTheGenerateCommandsOnTheSameModelAndAdapter) {
  Owner owner(adapter_, GetParam());
  const ModelOptions options{.slots = 3, .max_context = 24};
  std::unique_ptr<NextTokenModel> live = open_kv_cache_on_weights(owner.weights(), testing::fixture(kFixture), options,
                                                                  {.rows = 2, .chunk = 4});
  ModelOptions with_adapter = options;
  with_adapter.adapter = adapter_;
  std::unique_ptr<NextTokenModel> loaded = open_kv_cache_model(testing::fixture(kFixture), with_adapter, {.rows = 2, .chunk = 4});
  std::unique_ptr<NextTokenModel> base = open_kv_cache_model(testing::fixture(kFixture), options, {.rows = 2, .chunk = 4});
  const std::vector<std::vector<int32_t>> expected = completions(*loaded);
  EXPECT_EQ(completions(*live), expected);
  // The adapter decides some token: the comparison above is not the base model's.
  EXPECT_NE(completions(*base), expected);
  const std::vector<int32_t> prompt = testing::random_tokens(6, 64);
  EXPECT_EQ(live->feed(std::vector<SlotFeed>{{0, prompt}}), loaded->feed(std::vector<SlotFeed>{{0, prompt}}));
}

INSTANTIATE_TEST_SUITE_P(Owners, LiveWeightsOf, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "TrainingPlan" : "ForwardPlan"; });

TEST_F(LiveWeights, AWriteIntoTheOwnersWeightsIsWhatTheNextFeedComputesWith) {
  Owner owner(adapter_);
  const ModelOptions options{.slots = 1, .max_context = 16};
  std::unique_ptr<NextTokenModel> live = open_kv_cache_on_weights(owner.weights(), testing::fixture(kFixture), options);
  std::unique_ptr<NextTokenModel> base = open_kv_cache_model(testing::fixture(kFixture), options);
  const std::vector<int32_t> prompt = testing::random_tokens(7, 65);
  const std::vector<float> adapted = live->feed(std::vector<SlotFeed>{{0, prompt}});
  const std::vector<float> plain = base->feed(std::vector<SlotFeed>{{0, prompt}});
  EXPECT_GT(testing::relative_difference(adapted, plain), 1e-2);
  // B = 0 in the owner (as an optimizer step would write it): the adapter adds nothing any more.
  for (const models::LoraAdapter& lora : owner.session.adapters) {
    const graph::TensorId b = owner.plan.tensor(lora.b.name);
    const std::vector<float> zeros(static_cast<size_t>(owner.plan.graph.tensor(b).type.numel()), 0.0f);
    owner.backend.write(b, std::as_bytes(std::span<const float>(zeros)));
  }
  live->clear(0);
  EXPECT_EQ(live->feed(std::vector<SlotFeed>{{0, prompt}}), plain);
}

TEST_F(LiveWeights, AnOwnerWithoutTheAdaptersMatricesIsRefused) {
  Owner owner("");  // no adapter in the owner's graph
  LoadedWeights weights{&owner.plan, &owner.backend, adapter_lora()};
  EXPECT_THROW(open_kv_cache_on_weights(weights, testing::fixture(kFixture), {.slots = 1, .max_context = 16}),
               InternalError);
}

}  // namespace
}  // namespace surogate::generate
