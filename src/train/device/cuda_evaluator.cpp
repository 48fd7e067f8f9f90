// The GPU evaluator; see cuda_evaluator.h.
#include "train/device/cuda_evaluator.h"

#include "cuda/cuda_check.h"

namespace surogate::train {
namespace {

class CudaEvaluator final : public Evaluator {
public:
  CudaEvaluator(const EvaluatorSetup& setup, runtime::CudaBackend& training)
      : training_(training), loader_(setup.cache, setup.cache->eval(), setup.batch, setup.seed, setup.pad_id) {
    plan_ = compiler::compile_forward(evaluation_graph(setup, DType::BF16), *setup.registry);
    loss_ = plan_.tensor("loss");
    correct_ = plan_.tensor("correct");
    backend_.share_parameters_with(training_);
    backend_.load(plan_, *setup.registry);
    inputs_ = std::make_unique<BatchInputs>(plan_);
  }

  EvalResult run() override {
    CUDA_CHECK(cudaStreamSynchronize(training_.stream()));
    return evaluate_split(loader_, *inputs_, [this](std::span<const runtime::InputBinding> bindings) {
      backend_.execute(bindings);
      float loss = 0.0f, correct = 0.0f;
      backend_.read(loss_, std::as_writable_bytes(std::span<float>(&loss, 1)));
      backend_.read(correct_, std::as_writable_bytes(std::span<float>(&correct, 1)));
      return std::pair<double, double>(loss, correct);
    });
  }

private:
  runtime::CudaBackend& training_;
  compiler::ExecutionPlan plan_;
  runtime::CudaBackend backend_;
  data::DataLoader loader_;
  std::unique_ptr<BatchInputs> inputs_;
  graph::TensorId loss_ = graph::kNoTensor, correct_ = graph::kNoTensor;
};

}  // namespace

std::unique_ptr<Evaluator> make_cuda_evaluator(const EvaluatorSetup& setup, runtime::CudaBackend& training) {
  return std::make_unique<CudaEvaluator>(setup, training);
}

}  // namespace surogate::train
