// open_kv_cache_on_weights on the CUDA backend: a bf16 forward plan with an unmerged LoRA adapter
// loaded on a CudaBackend stands in for the trainer; the model reading its weights in place gives
// the logits and greedy tokens of the model that loads the folder and adapter itself (the same
// bf16 graphs and kernels: equal, not merely close), and a write into the owner's weights is what
// the next feed computes with. Skips without a GPU.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "cuda/device_info.h"
#include "generate/generator.h"
#include "kv_model_pair.h"
#include "models/model_definition.h"
#include "models/session_loading.h"
#include "ops/defs/register_ops.h"
#include "runtime/cuda_backend.h"

namespace surogate::generate {
namespace {

constexpr const char* kFixture = "llama_gqa_llama3";

class LiveWeightsCuda : public ::testing::Test {
protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
    std::filesystem::remove_all(adapter_);
    testing::write_random_adapter(adapter_, kFixture);
    const io::ModelConfig config = models::load_model_config(testing::fixture(kFixture), {});
    models::DecoderGraphOptions shape{2, 8, 1, false};
    shape.dtype = DType::BF16;
    session_ = models::build_session_graph(config, registry_, shape, {}, adapter_);
    plan_ = compiler::compile_forward(session_.graph, registry_);
    backend_ = std::make_unique<runtime::CudaBackend>();
    backend_->load(plan_, registry_);
    models::load_session_weights(testing::fixture(kFixture), config, session_, plan_, *backend_);
  }
  void TearDown() override { std::filesystem::remove_all(adapter_); }

  LoadedWeights weights() const {
    models::LoraOptions lora;
    lora.rank = 4;
    lora.alpha = 8.0;
    lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
    return {&plan_, backend_.get(), lora};
  }

  // One per test process: ctest runs the cases as processes of their own, side by side.
  const std::filesystem::path adapter_ = std::filesystem::temp_directory_path() / ("surogate_live_weights_cuda_adapter_" + std::to_string(::getpid()));
  graph::OpRegistry registry_ = ops::make_model_registry();
  models::SessionGraph session_;
  compiler::ExecutionPlan plan_;
  std::unique_ptr<runtime::CudaBackend> backend_;
};

TEST_F(LiveWeightsCuda, LogitsAndGreedyTokensEqualTheAdapterLoadedFromDisk) {
  const ModelOptions options{.cuda = true, .slots = 2, .max_context = 24};
  ModelOptions with_adapter = options;
  with_adapter.adapter = adapter_;
  std::unique_ptr<NextTokenModel> live = open_kv_cache_on_weights(weights(), testing::fixture(kFixture), options);
  std::unique_ptr<NextTokenModel> loaded = open_kv_cache_model(testing::fixture(kFixture), with_adapter);
  const std::vector<int32_t> prompt = testing::random_tokens(7, 71);
  EXPECT_EQ(live->feed(std::vector<SlotFeed>{{0, prompt}}), loaded->feed(std::vector<SlotFeed>{{0, prompt}}));
  live->clear(0);
  loaded->clear(0);
  GenerationRequest request;
  request.prompt = prompt;
  request.max_new_tokens = 8;
  const std::vector<GenerationRequest> requests{request, request};
  const std::vector<GenerationResult> ours = generate(*live, requests, nullptr);
  const std::vector<GenerationResult> theirs = generate(*loaded, requests, nullptr);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(ours[i].completion_ids, theirs[i].completion_ids) << i;
}

TEST_F(LiveWeightsCuda, AWriteIntoTheOwnersWeightsIsWhatTheNextFeedComputesWith) {
  // (Not compared with the base model: with B = 0 the adapted graph's linear_add may pick another
  // cuBLASLt algorithm than a plain linear, so equality would not be bitwise.) A model opened
  // after the write computes with the written weights; the one opened before must agree with it.
  const ModelOptions options{.cuda = true, .slots = 1, .max_context = 16};
  std::unique_ptr<NextTokenModel> before = open_kv_cache_on_weights(weights(), testing::fixture(kFixture), options);
  const std::vector<int32_t> prompt = testing::random_tokens(7, 72);
  const std::vector<float> adapted = before->feed(std::vector<SlotFeed>{{0, prompt}});
  for (const models::LoraAdapter& lora : session_.adapters) {
    const graph::TensorId b = plan_.tensor(lora.b.name);
    const std::vector<float> zeros(static_cast<size_t>(plan_.graph.tensor(b).type.numel()), 0.0f);
    models::write_float32(*backend_, plan_, b, zeros);
  }
  std::unique_ptr<NextTokenModel> after = open_kv_cache_on_weights(weights(), testing::fixture(kFixture), options);
  before->clear(0);
  const std::vector<float> written = before->feed(std::vector<SlotFeed>{{0, prompt}});
  EXPECT_NE(written, adapted);
  EXPECT_EQ(written, after->feed(std::vector<SlotFeed>{{0, prompt}}));
}

}  // namespace
}  // namespace surogate::generate
