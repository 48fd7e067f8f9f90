// The GPU evaluator; see cuda_evaluator.h.
#include "train/device/cuda_evaluator.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "core/bfloat16.h"
#include "cuda/cuda_check.h"
#include "cuda/host_buffer.h"
#include "ops/parallel_for.h"
#include "train/device/cuda_weight_gatherer.h"
#include "train/device/quantized_base_shards.h"
#include "train/device/weight_shards.h"

namespace surogate::train {
namespace {

// `gather_from` null: the weights are read in place from `training`. Otherwise (ZeRO-3) they are
// gathered layer by layer from a pinned bf16 image of those host copies.
class CudaEvaluator final : public Evaluator {
public:
  CudaEvaluator(const EvaluatorSetup& setup, runtime::CudaBackend& training, const std::span<const WeightView>* gather_from,
                const QuantizedPieceSource& quantized)
      : training_(training), loader_(setup.cache, setup.cache->eval(), setup.batch, setup.seed, setup.pad_id) {
    plan_ = compiler::compile_forward(evaluation_graph(setup, setup.fp16 ? DType::F16 : DType::BF16), *setup.registry);
    if (gather_from != nullptr) {
      host_weights_ = *gather_from;
      gathering_ = evaluation_gathering(plan_);
      compiler::apply_weight_gathering(plan_, gathering_);
      // The quantized base from a pinned image, a world of one as offload_quants keeps it.
      if (quantized) quantized_gathering_ = quantized_base_gathering(plan_, QuantizedBaseKeeping::Offloaded, 1);
      compiler::apply_weight_gathering(plan_, quantized_gathering_);
    }
    loss_ = plan_.tensor("loss");
    correct_ = plan_.tensor("correct");
    backend_.share_parameters_with(training_);  // what the plan keeps whole (all of it without gathering)
    // Its activations and scratch in the training's (they hold nothing between the training's
    // executes, and run() waits for the training stream and reads its results back before
    // returning). Not with gathering: the training plan's gather buffers lie in its arena.
    if (gather_from == nullptr) backend_.share_activation_memory_with(training_);
    backend_.load(plan_, *setup.registry);
    inputs_ = evaluation_inputs(setup, plan_);
    if (gather_from != nullptr) start_gathering(quantized);
  }
  ~CudaEvaluator() override {
    // The image and the events must outlive the copies in flight (none after a run: its reads wait).
    if (side_) cudaStreamSynchronize(side_->get());
  }

  EvalResult run() override {
    CUDA_CHECK(cudaStreamSynchronize(training_.stream()));
    if (gatherer_) fill_image();
    return evaluate_split(loader_, *inputs_, [this](std::span<const runtime::InputBinding> bindings) {
      backend_.execute(bindings);
      float loss = 0.0f, correct = 0.0f;
      backend_.read(loss_, std::as_writable_bytes(std::span<float>(&loss, 1)));
      backend_.read(correct_, std::as_writable_bytes(std::span<float>(&correct, 1)));
      return std::pair<double, double>(loss, correct);
    });
  }

private:
  // The image (every group's bf16 bits back to back, laid out as its buffer) and the observer
  // that copies a group in on the side stream, one use ahead.
  void start_gathering(const QuantizedPieceSource& quantized) {
    size_t elements = 0;
    for (const compiler::GatherGroup& group : gathering_.groups) {
      image_offsets_.push_back(elements);
      elements += group.elements;
    }
    image_ = cuda::PinnedHostBuffer<uint16_t>(elements);
    std::fill_n(image_.data(), elements, uint16_t{0});
    side_.emplace();
    gatherer_ = std::make_unique<CudaWeightGatherer>(
        gathering_, backend_, side_->get(), [this](size_t g, void* buffer, cudaStream_t stream) {
          CUDA_CHECK(cudaMemcpyAsync(buffer, image_.data() + image_offsets_[g], gathering_.groups[g].bytes(),
                                     cudaMemcpyHostToDevice, stream));
        });
    observers_.add(gatherer_.get());
    if (!quantized_gathering_.empty()) start_quantized_gathering(quantized);
    backend_.set_step_observer(&observers_);
  }

  // The quantized base's image (its pieces never change: filled once) and its gatherer.
  void start_quantized_gathering(const QuantizedPieceSource& quantized) {
    quantized_image_ = cuda::PinnedHostBuffer<std::byte>(quantized_gathering_.owned_elements[0]);
    std::memset(quantized_image_.data(), 0, quantized_image_.bytes());
    const QuantizedBaseShard image{&quantized_gathering_, 0, quantized_image_.data()};
    for (graph::TensorId id : quantized_base_pieces(plan_)) {
      const std::span<const std::byte> bytes = quantized(plan_.graph.tensor(id).name);
      SUROGATE_CHECK(bytes.size() == plan_.graph.tensor(id).type.size_bytes(), "quantized piece '{}' differs in size",
                     plan_.graph.tensor(id).name);
      std::memcpy(quantized_image_.data() + *image.offset_of(id), bytes.data(), bytes.size());
    }
    quantized_gatherer_ = std::make_unique<CudaWeightGatherer>(
        quantized_gathering_, backend_, side_->get(), [this, image](size_t g, void* buffer, cudaStream_t stream) {
          CUDA_CHECK(cudaMemcpyAsync(buffer, image.piece(g), image.piece_bytes(g), cudaMemcpyHostToDevice, stream));
        });
    observers_.add(quantized_gatherer_.get());
  }

  // The host copies rounded to bf16 (to nearest even, as the ranks round the weights they keep).
  void fill_image() {
    std::map<std::string, std::span<const float>> by_name;
    for (const WeightView& weight : host_weights_) by_name[weight.name] = weight.values;
    constexpr size_t kBlock = size_t{1} << 20;
    for (size_t g = 0; g < gathering_.groups.size(); ++g) {
      const compiler::GatherGroup& group = gathering_.groups[g];
      for (size_t i = 0; i < group.tensors.size(); ++i) {
        const std::span<const float> values = by_name.at(plan_.graph.tensor(group.tensors[i]).name);
        uint16_t* out = image_.data() + image_offsets_[g] + group.tensor_offsets[i];
        ops::parallel_for(static_cast<int64_t>((values.size() + kBlock - 1) / kBlock), [&](int64_t block) {
          const size_t begin = static_cast<size_t>(block) * kBlock;
          const size_t end = std::min(values.size(), begin + kBlock);
          for (size_t k = begin; k < end; ++k) out[k] = float_to_bf16(values[k]);
        });
      }
    }
  }

  runtime::CudaBackend& training_;
  compiler::ExecutionPlan plan_;
  runtime::CudaBackend backend_;
  data::DataLoader loader_;
  std::unique_ptr<BatchInputs> inputs_;
  graph::TensorId loss_ = graph::kNoTensor, correct_ = graph::kNoTensor;
  // ZeRO-3 only:
  std::span<const WeightView> host_weights_;
  compiler::WeightGathering gathering_;
  std::optional<cuda::Stream> side_;
  cuda::PinnedHostBuffer<uint16_t> image_;
  std::vector<size_t> image_offsets_;  // each group's start in the image (elements)
  std::unique_ptr<CudaWeightGatherer> gatherer_;
  compiler::WeightGathering quantized_gathering_;  // empty unless the quantized base is gathered too
  cuda::PinnedHostBuffer<std::byte> quantized_image_;
  std::unique_ptr<CudaWeightGatherer> quantized_gatherer_;
  runtime::StepObserverList observers_;
};

// An evaluator run on rank 0's thread; see on_rank_zero.
class RankZeroEvaluator final : public Evaluator {
public:
  RankZeroEvaluator(distributed::RankThreads& threads, std::unique_ptr<Evaluator> inner)
      : threads_(threads), inner_(std::move(inner)) {}
  ~RankZeroEvaluator() override {
    try {
      threads_.run([&](int r) {
        if (r == 0) inner_.reset();
      });
    } catch (...) {
      // Shutting down after a failure: nothing more to report.
    }
  }
  EvalResult run() override {
    EvalResult result;
    threads_.run([&](int r) {
      if (r == 0) result = inner_->run();
    });
    return result;
  }

private:
  distributed::RankThreads& threads_;
  std::unique_ptr<Evaluator> inner_;
};

}  // namespace

std::unique_ptr<Evaluator> make_cuda_evaluator(const EvaluatorSetup& setup, runtime::CudaBackend& training) {
  return std::make_unique<CudaEvaluator>(setup, training, nullptr, QuantizedPieceSource{});
}

std::unique_ptr<Evaluator> make_cuda_gathering_evaluator(const EvaluatorSetup& setup, runtime::CudaBackend& training,
                                                         std::span<const WeightView> weights,
                                                         const QuantizedPieceSource& quantized) {
  return std::make_unique<CudaEvaluator>(setup, training, &weights, quantized);
}

std::unique_ptr<Evaluator> on_rank_zero(distributed::RankThreads& threads, std::unique_ptr<Evaluator> inner) {
  return std::make_unique<RankZeroEvaluator>(threads, std::move(inner));
}

}  // namespace surogate::train
