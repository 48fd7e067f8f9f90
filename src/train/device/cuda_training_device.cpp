// The CUDA training device (bf16 recipe): the plan runs in bf16 on CudaBackend; every trainable
// parameter also has an fp32 master copy, fp32 AdamW moments and an fp32 gradient accumulator
// on the device. Per optimizer step, all on the backend's stream:
//   per micro-batch: execute (bf16 gradients) → accumulate_bf16_gradients (fp32 += bf16, bf16 = 0)
//                    → the loss scalar copied into pinned host memory (asynchronously)
//   measure():       global_grad_norm (norm and clip factor on the device) → one wait, read both
//   update():        adamw_update per tensor (gradient scaled by the device clip factor, master
//                    updated, bf16 weight rewritten) → fp32 accumulators zeroed
// The host waits only in measure(), to read the loss and grad norm the trainer logs and checks.
// Host copies: weights() are fp32 (the masters after download()); frozen weights (the LoRA
// base) live on the device only in bf16, written once from the host copy by upload().
#include <cstring>

#include <fmt/format.h>

#include "core/bfloat16.h"
#include "core/error.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/adamw.h"
#include "cuda/kernels/grad_norm.h"
#include "runtime/cuda_backend.h"
#include "train/device/gradient_accumulate.h"
#include "train/device/training_device.h"
#include "train/optim/adamw_math.h"

namespace surogate::train {
namespace {

// Offsets into the fp32 device buffers are rounded up to 4 floats, so every tensor starts
// 16-byte aligned (the grad-norm and AdamW kernels load float4 vectors).
int64_t aligned(int64_t count) { return (count + 3) / 4 * 4; }

struct PinnedFloats {
  float* data = nullptr;
  explicit PinnedFloats(size_t count) { CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data), count * sizeof(float))); }
  ~PinnedFloats() { if (data) cudaFreeHost(data); }
  PinnedFloats(const PinnedFloats&) = delete;
  PinnedFloats& operator=(const PinnedFloats&) = delete;
};

class CudaTrainingDevice final : public TrainingDevice {
public:
  explicit CudaTrainingDevice(const TrainingDeviceSetup& setup)
      : plan_(*setup.plan), config_(*setup.config),
        max_micro_batches_(std::max<int64_t>(1, config_.gradient_accumulation_steps)),
        losses_(static_cast<size_t>(max_micro_batches_)), norm_(2) {
    backend_.load(plan_, *setup.registry);
    loss_ = plan_.loss;
    host_values_.reserve(setup.specs.size());
    int64_t total = 0;
    for (const models::ParameterSpec& spec : setup.specs) {
      graph::TensorId id = plan_.tensor(spec.name);
      const graph::TensorType& type = plan_.graph.tensor(id).type;
      if (type.dtype != DType::BF16) {
        fail_user("the CUDA trainer needs a bf16 plan, but parameter '{}' is {}", spec.name, dtype_safetensors_name(type.dtype));
      }
      host_values_.emplace_back(static_cast<size_t>(type.numel()), 0.0f);
      weights_.push_back({spec.name, spec.shape, host_values_.back()});
      ids_.push_back(id);
      auto gradient = plan_.parameter_gradients.find(id);
      if (gradient == plan_.parameter_gradients.end()) continue;  // frozen (LoRA base)
      Trainable entry{weights_.size() - 1, id, gradient->second, total, type.numel(),
                      applies_weight_decay(spec.name)};
      total += aligned(entry.count);
      entries_.push_back(entry);
      trainable_.push_back(weights_.back());
      first_moment_.emplace_back(static_cast<size_t>(entry.count), 0.0f);
      second_moment_.emplace_back(static_cast<size_t>(entry.count), 0.0f);
    }
    SUROGATE_CHECK(!entries_.empty(), "the model has trainable parameters");
    master_ = cuda::DeviceBuffer<float>(static_cast<size_t>(total));
    exp_avg_ = cuda::DeviceBuffer<float>(static_cast<size_t>(total));
    exp_avg_sq_ = cuda::DeviceBuffer<float>(static_cast<size_t>(total));
    accumulators_ = cuda::DeviceBuffer<float>(static_cast<size_t>(total));
    accumulators_.zero(backend_.stream());
    norm_result_ = cuda::DeviceBuffer<float>(2);
    norm_partials_ = cuda::DeviceBuffer<float>(static_cast<size_t>(cuda::kGradNormBlocks) * entries_.size());
    // The pointer tables of the multi-tensor kernels, built once.
    std::vector<__nv_bfloat16*> bf16_gradients;
    std::vector<float*> accumulators;
    std::vector<int64_t> counts;
    for (const Trainable& entry : entries_) {
      bf16_gradients.push_back(static_cast<__nv_bfloat16*>(backend_.device_address(entry.gradient)));
      accumulators.push_back(accumulators_.data() + entry.offset);
      counts.push_back(entry.count);
    }
    gradient_table_ = cuda::to_device(bf16_gradients);
    accumulator_table_ = cuda::to_device(accumulators);
    count_table_ = cuda::to_device(counts);
  }

  std::string description() const override {
    return "CUDA backend, bf16 weights and activations, fp32 master weights, gradient accumulation and AdamW moments";
  }
  std::span<const WeightView> weights() const override { return weights_; }
  std::span<const WeightView> trainable() const override { return trainable_; }

  std::vector<StateTensor> optimizer_state() override {
    // The CPU AdamW's names, dtypes and shapes, so checkpoints are interchangeable.
    std::vector<StateTensor> tensors;
    for (size_t index = 0; index < entries_.size(); ++index) {
      const WeightView& weight = trainable_[index];
      std::vector<int64_t> shape = weight.shape.size() == 2 ? weight.shape : std::vector<int64_t>{1, weight.shape[0]};
      tensors.push_back({weight.name + ".exp_avg", DType::F32, shape, first_moment_[index].data(),
                         first_moment_[index].size() * sizeof(float)});
      tensors.push_back({weight.name + ".exp_avg_sq", DType::F32, shape, second_moment_[index].data(),
                         second_moment_[index].size() * sizeof(float)});
    }
    return tensors;
  }

  void upload() override {
    cudaStream_t stream = backend_.stream();
    for (size_t i = 0; i < weights_.size(); ++i) {
      std::span<const float> values = weights_[i].values;
      std::vector<uint16_t> bits(values.size());
      for (size_t k = 0; k < values.size(); ++k) bits[k] = float_to_bf16(values[k]);
      backend_.write(ids_[i], std::as_bytes(std::span<const uint16_t>(bits)));
    }
    for (size_t index = 0; index < entries_.size(); ++index) {
      const Trainable& entry = entries_[index];
      copy(master_.data() + entry.offset, weights_[entry.weight].values.data(), entry.count, cudaMemcpyHostToDevice, stream);
      copy(exp_avg_.data() + entry.offset, first_moment_[index].data(), entry.count, cudaMemcpyHostToDevice, stream);
      copy(exp_avg_sq_.data() + entry.offset, second_moment_[index].data(), entry.count, cudaMemcpyHostToDevice, stream);
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  void download() override {
    cudaStream_t stream = backend_.stream();
    for (size_t index = 0; index < entries_.size(); ++index) {
      const Trainable& entry = entries_[index];
      copy(weights_[entry.weight].values.data(), master_.data() + entry.offset, entry.count, cudaMemcpyDeviceToHost, stream);
      copy(first_moment_[index].data(), exp_avg_.data() + entry.offset, entry.count, cudaMemcpyDeviceToHost, stream);
      copy(second_moment_[index].data(), exp_avg_sq_.data() + entry.offset, entry.count, cudaMemcpyDeviceToHost, stream);
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  void accumulate(std::span<const runtime::InputBinding> inputs) override {
    if (micro_batches_ >= max_micro_batches_) {
      fail_user("internal: more micro-batches than gradient_accumulation_steps ({}) in one step", max_micro_batches_);
    }
    cudaStream_t stream = backend_.stream();
    backend_.execute(inputs);
    cuda_kernels::accumulate_bf16_gradients(gradient_table_.data(), accumulator_table_.data(), count_table_.data(),
                                            static_cast<int>(entries_.size()), stream);
    CUDA_CHECK(cudaMemcpyAsync(losses_.data + micro_batches_, backend_.device_address(loss_), sizeof(float),
                               cudaMemcpyDeviceToHost, stream));
    ++micro_batches_;
  }

  StepMetrics measure() override {
    cudaStream_t stream = backend_.stream();
    cuda::global_grad_norm(norm_result_.data(), norm_partials_.data(), accumulator_table_.data(), count_table_.data(),
                           static_cast<int>(entries_.size()), static_cast<float>(config_.max_grad_norm), stream);
    CUDA_CHECK(cudaMemcpyAsync(norm_.data, norm_result_.data(), 2 * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    StepMetrics metrics;
    for (int64_t i = 0; i < micro_batches_; ++i) metrics.loss += losses_.data[i];
    metrics.grad_norm = norm_.data[0];
    micro_batches_ = 0;
    return metrics;
  }

  void update(const OptimizerStep& step) override {
    cudaStream_t stream = backend_.stream();
    AdamWSettings settings{config_.adamw_beta1, config_.adamw_beta2, config_.adamw_epsilon};
    AdamWCoefficients coefficients = adamw_coefficients(settings, step);
    // norm_result_[1] is the clip factor global_grad_norm left on the device (1 when
    // max_grad_norm is 0), read by the kernel: no host round trip.
    const float* clip = norm_result_.data() + 1;
    for (const Trainable& entry : entries_) {
      cuda::AdamWStep kernel_step{coefficients.beta1, coefficients.beta2, coefficients.epsilon,
                                  coefficients.step_size, coefficients.second_correction,
                                  entry.weight_decay ? static_cast<float>(step.learning_rate * step.weight_decay) : 0.0f};
      cuda::adamw_update(static_cast<__nv_bfloat16*>(backend_.device_address(entry.parameter)),
                         master_.data() + entry.offset, exp_avg_.data() + entry.offset,
                         exp_avg_sq_.data() + entry.offset, accumulators_.data() + entry.offset, clip, entry.count,
                         kernel_step, stream);
    }
    accumulators_.zero(stream);
  }

private:
  struct Trainable {
    size_t weight;               // index into weights_
    graph::TensorId parameter;   // the bf16 weight in the plan
    graph::TensorId gradient;    // its bf16 gradient
    int64_t offset;              // into the fp32 buffers
    int64_t count;
    bool weight_decay;
  };

  static void copy(float* destination, const float* source, int64_t count, cudaMemcpyKind kind, cudaStream_t stream) {
    CUDA_CHECK(cudaMemcpyAsync(destination, source, static_cast<size_t>(count) * sizeof(float), kind, stream));
  }

  const compiler::ExecutionPlan& plan_;
  const Config& config_;
  int64_t max_micro_batches_;
  runtime::CudaBackend backend_;
  graph::TensorId loss_ = graph::kNoTensor;
  std::vector<std::vector<float>> host_values_;
  std::vector<WeightView> weights_, trainable_;
  std::vector<graph::TensorId> ids_;
  std::vector<Trainable> entries_;
  std::vector<std::vector<float>> first_moment_, second_moment_;  // host copies for checkpoints
  cuda::DeviceBuffer<float> master_, exp_avg_, exp_avg_sq_, accumulators_, norm_result_, norm_partials_;
  cuda::DeviceBuffer<__nv_bfloat16*> gradient_table_;
  cuda::DeviceBuffer<float*> accumulator_table_;
  cuda::DeviceBuffer<int64_t> count_table_;
  PinnedFloats losses_, norm_;
  int64_t micro_batches_ = 0;
};

}  // namespace

std::unique_ptr<TrainingDevice> make_cuda_training_device(const TrainingDeviceSetup& setup) {
  return std::make_unique<CudaTrainingDevice>(setup);
}

}  // namespace surogate::train
