// The CUDA training device (bf16 recipe): the plan runs in bf16 on CudaBackend; every trainable
// parameter also has a master copy and a gradient accumulator on the device, and the optimizer
// (device_optimizer.h: adamw, adamw_8bit or normuon) keeps its state there too.
//   master_dtype fp32 (default): an fp32 master per parameter; the bf16 weights are rewritten
//                                from it (round to nearest) each step;
//   master_dtype bf16:           no master copy; the optimizer updates the bf16 weights in place
//                                with stochastic rounding (core/stochastic_rounding.h);
//   gradient_dtype fp32 (default) / bf16: the accumulators' dtype.
// Per optimizer step, all on the backend's stream:
//   per micro-batch: execute (bf16 gradients) → accumulate_bf16_gradients (accumulator += bf16,
//                    bf16 = 0) → the loss scalar copied into pinned host memory (asynchronously)
//   measure():       global_grad_norm (norm and clip factor on the device) → one wait, read both
//   update():        the optimizer's step (gradients scaled by the device clip factor, masters
//                    updated, bf16 weights rewritten) → accumulators zeroed
// The host waits only in measure(), to read the loss and grad norm the trainer logs and checks.
// Host copies: weights() are fp32 (after download(): the fp32 masters, or the bf16 weights
// widened exactly); frozen weights (the LoRA base) live on the device only in bf16, written once
// from the host copy by upload().
#include <algorithm>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "core/bfloat16.h"
#include "core/error.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/fp8_quantize.h"
#include "cuda/kernels/grad_norm.h"
#include "ops/parallel_for.h"
#include "runtime/cuda_backend.h"
#include "train/device/cuda_evaluator.h"
#include "train/device/device_optimizer.h"
#include "train/device/fp8_state.h"
#include "train/device/gradient_accumulate.h"
#include "train/device/training_device.h"
#include "train/quantized_weights.h"

namespace surogate::train {
namespace {

// Offsets into the master and accumulator buffers are rounded up to 4 elements, so every tensor
// starts 16-byte (fp32) or 8-byte (bf16) aligned (the grad-norm and optimizer kernels load
// 4-element vectors).
int64_t aligned(int64_t count) { return (count + 3) / 4 * 4; }

struct PinnedFloats {
  float* data = nullptr;
  explicit PinnedFloats(size_t count) { CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data), count * sizeof(float))); }
  ~PinnedFloats() { if (data) cudaFreeHost(data); }
  PinnedFloats(const PinnedFloats&) = delete;
  PinnedFloats& operator=(const PinnedFloats&) = delete;
};

// Two halves of pinned host memory for upload(): a half is refilled only after the copy that
// last read it has run (one event per half).
class UploadStaging {
public:
  explicit UploadStaging(size_t elements_per_half) : elements_(elements_per_half) {
    void* pinned = nullptr;
    CUDA_CHECK(cudaMallocHost(&pinned, 2 * elements_ * sizeof(uint16_t)));
    memory_ = static_cast<uint16_t*>(pinned);
    for (cudaEvent_t& event : done_) CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  UploadStaging(const UploadStaging&) = delete;
  UploadStaging& operator=(const UploadStaging&) = delete;
  ~UploadStaging() {
    for (int half = 0; half < 2; ++half) {
      if (pending_[half]) cudaEventSynchronize(done_[half]);
      cudaEventDestroy(done_[half]);
    }
    cudaFreeHost(memory_);
  }
  // The half's memory, once the copy that last read it has run.
  uint16_t* wait_for(int half) {
    if (pending_[half]) CUDA_CHECK(cudaEventSynchronize(done_[half]));
    pending_[half] = false;
    return memory_ + static_cast<size_t>(half) * elements_;
  }
  // A copy reading the half was queued on `stream`.
  void issued(int half, cudaStream_t stream) {
    CUDA_CHECK(cudaEventRecord(done_[half], stream));
    pending_[half] = true;
  }

private:
  size_t elements_;
  uint16_t* memory_ = nullptr;
  cudaEvent_t done_[2] = {};
  bool pending_[2] = {false, false};
};

class CudaTrainingDevice final : public TrainingDevice {
public:
  explicit CudaTrainingDevice(const TrainingDeviceSetup& setup)
      : plan_(*setup.plan), config_(*setup.config),
        max_micro_batches_(std::max<int64_t>(1, config_.gradient_accumulation_steps)),
        bf16_master_(config_.master_dtype == MasterDtype::Bf16),
        bf16_gradients_(config_.gradient_dtype == GradientDtype::Bf16),
        losses_(static_cast<size_t>(max_micro_batches_)), norm_(2) {
    SUROGATE_CHECK(!config_.gradient_dtype || *config_.gradient_dtype == GradientDtype::Fp32 || bf16_gradients_ ||
                       config_.recipe == Recipe::Fp8Hybrid,
                   "gradient_dtype fp8 without recipe fp8_hybrid was rejected when the configuration was loaded");
    backend_.load(plan_, *setup.registry);
    backend_.set_time_breakdown(config_.debug_time_breakdown);
    backend_.set_cuda_graphs(config_.use_cuda_graphs);
    loss_ = plan_.loss;
    host_values_.reserve(setup.specs.size());
    int64_t total = 0;
    for (const models::ParameterSpec& spec : setup.specs) {
      graph::TensorId id = plan_.tensor(spec.name);
      const graph::TensorType& type = plan_.graph.tensor(id).type;
      if (type.dtype != DType::BF16) {
        fail_user("the CUDA trainer needs a bf16 plan, but parameter '{}' is {}", spec.name, dtype_safetensors_name(type.dtype));
      }
      // Uninitialised: every value is written (loaded, initialised or restored) before upload(),
      // and zeroing 32 GB of an 8B model's host copies took ~15 s of start-up.
      const auto count = static_cast<size_t>(type.numel());
      host_values_.push_back(std::make_unique_for_overwrite<float[]>(count));
      weights_.push_back({spec.name, spec.shape, std::span<float>(host_values_.back().get(), count)});
      ids_.push_back(id);
      auto gradient = plan_.parameter_gradients.find(id);
      if (gradient == plan_.parameter_gradients.end()) continue;  // frozen (LoRA base)
      Trainable entry{weights_.size() - 1, id, gradient->second, total, type.numel()};
      total += aligned(entry.count);
      entries_.push_back(entry);
      trainable_.push_back(weights_.back());
    }
    SUROGATE_CHECK(!entries_.empty(), "the model has trainable parameters");
    std::vector<DeviceParameter> parameters = describe_parameters();
    check_free_memory(total, device_optimizer_bytes(config_, parameters));
    if (!bf16_master_) master_ = cuda::DeviceBuffer<float>(static_cast<size_t>(total));
    if (bf16_gradients_) {
      bf16_accumulators_ = cuda::DeviceBuffer<__nv_bfloat16>(static_cast<size_t>(total));
    } else {
      accumulators_ = cuda::DeviceBuffer<float>(static_cast<size_t>(total));
    }
    zero_accumulators(backend_.stream());
    if ((fp8_ = fp8_state(plan_))) fp8_host_.assign(static_cast<size_t>(fp8_->shape.floats()), 0.0f);
    norm_result_ = cuda::DeviceBuffer<float>(2);
    norm_partials_ = cuda::DeviceBuffer<float>(static_cast<size_t>(cuda::kGradNormBlocks) * entries_.size());
    // The pointer tables of the multi-tensor kernels, built once.
    std::vector<__nv_bfloat16*> bf16_gradients, bf16_accumulators;
    std::vector<float*> accumulators;
    std::vector<int64_t> counts;
    for (const Trainable& entry : entries_) {
      bf16_gradients.push_back(static_cast<__nv_bfloat16*>(backend_.device_address(entry.gradient)));
      if (bf16_gradients_) bf16_accumulators.push_back(bf16_accumulators_.data() + entry.offset);
      else accumulators.push_back(accumulators_.data() + entry.offset);
      counts.push_back(entry.count);
    }
    gradient_table_ = cuda::to_device(bf16_gradients);
    if (bf16_gradients_) bf16_accumulator_table_ = cuda::to_device(bf16_accumulators);
    else accumulator_table_ = cuda::to_device(accumulators);
    count_table_ = cuda::to_device(counts);
    for (size_t i = 0; i < entries_.size(); ++i) {
      const int64_t offset = entries_[i].offset;
      if (!bf16_master_) parameters[i].master = master_.data() + offset;
      if (bf16_gradients_) parameters[i].gradient_bf16 = bf16_accumulators_.data() + offset;
      else parameters[i].gradient = accumulators_.data() + offset;
    }
    optimizer_ = make_device_optimizer(config_, std::move(parameters));
  }

  std::string description() const override {
    return fmt::format("CUDA backend, bf16 weights and activations, {}, {} gradient accumulation, {} state",
                       bf16_master_ ? "bf16 master weights (updated in place with stochastic rounding, no fp32 copy)"
                                    : "fp32 master weights",
                       bf16_gradients_ ? "bf16" : "fp32", optimizer_->name());
  }
  std::span<const WeightView> weights() const override { return weights_; }
  std::span<const WeightView> trainable() const override { return trainable_; }

  std::vector<std::pair<std::string, double>> time_breakdown() override {
    if (!config_.debug_time_breakdown) return {};
    return backend_.time_breakdown();
  }

  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    return make_cuda_evaluator(setup, backend_);
  }

  // The CPU optimizers' names, dtypes and shapes, so checkpoints are interchangeable.
  std::vector<StateTensor> optimizer_state() override {
    std::vector<StateTensor> tensors = optimizer_->state_tensors();
    if (fp8_) tensors.push_back(fp8_->state_tensor(fp8_host_.data()));
    return tensors;
  }

  // Every weight is rounded to bf16 on all cores into one of two pinned staging buffers while the
  // other one's copy to the device runs (an 8B model: 16 GB through 64 MiB halves, at the host
  // link's speed instead of one core's rounding plus a pageable copy per tensor).
  void upload() override {
    cudaStream_t stream = backend_.stream();
    constexpr size_t kStagingElements = size_t{32} << 20;  // 64 MiB of bf16 per half
    UploadStaging staging(kStagingElements);
    int half = 0;
    for (size_t i = 0; i < weights_.size(); ++i) {
      std::span<const float> values = weights_[i].values;
      auto* device = static_cast<uint16_t*>(backend_.device_address(ids_[i]));
      for (size_t first = 0; first < values.size(); first += kStagingElements) {
        const size_t count = std::min(kStagingElements, values.size() - first);
        uint16_t* bits = staging.wait_for(half);
        constexpr int64_t kBlock = int64_t{1} << 20;
        const auto blocks = static_cast<int64_t>((count + kBlock - 1) / kBlock);
        ops::parallel_for(blocks, [&](int64_t block) {
          const size_t begin = static_cast<size_t>(block * kBlock);
          const size_t end = std::min(count, begin + static_cast<size_t>(kBlock));
          for (size_t k = begin; k < end; ++k) bits[k] = float_to_bf16(values[first + k]);
        });
        CUDA_CHECK(cudaMemcpyAsync(device + first, bits, count * sizeof(uint16_t), cudaMemcpyHostToDevice, stream));
        staging.issued(half, stream);
        half ^= 1;
      }
    }
    // A bf16 master is the bf16 weight just written (exact when the host values came from a
    // download or a checkpoint of this device).
    for (size_t index = 0; index < entries_.size() && !bf16_master_; ++index) {
      const Trainable& entry = entries_[index];
      copy(master_.data() + entry.offset, weights_[entry.weight].values.data(), entry.count, cudaMemcpyHostToDevice, stream);
    }
    optimizer_->upload(stream);
    if (fp8_) copy(fp8_device(), fp8_host_.data(), fp8_host_.size(), cudaMemcpyHostToDevice, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  void store_quantized(const models::QuantizedWeight& weight, QuantizedPieces pieces) override {
    write_quantized(backend_, plan_, weight, pieces);
  }

  void download() override {
    cudaStream_t stream = backend_.stream();
    for (size_t index = 0; index < entries_.size(); ++index) {
      const Trainable& entry = entries_[index];
      std::span<float> values = weights_[entry.weight].values;
      if (bf16_master_) {
        // The bf16 weights widened to fp32, exactly (what checkpoints and outputs save).
        std::vector<uint16_t> bits(values.size());
        backend_.read(entry.parameter, std::as_writable_bytes(std::span<uint16_t>(bits)));
        for (size_t k = 0; k < bits.size(); ++k) values[k] = bf16_to_float(bits[k]);
      } else {
        copy(values.data(), master_.data() + entry.offset, entry.count, cudaMemcpyDeviceToHost, stream);
      }
    }
    optimizer_->download(stream);
    if (fp8_) copy(fp8_host_.data(), fp8_device(), fp8_host_.size(), cudaMemcpyDeviceToHost, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  void accumulate(std::span<const runtime::InputBinding> inputs) override {
    if (micro_batches_ >= max_micro_batches_) {
      fail_user("internal: more micro-batches than gradient_accumulation_steps ({}) in one step", max_micro_batches_);
    }
    cudaStream_t stream = backend_.stream();
    backend_.execute(inputs);
    const int tensors = static_cast<int>(entries_.size());
    if (bf16_gradients_) {
      cuda_kernels::accumulate_bf16_gradients(gradient_table_.data(), bf16_accumulator_table_.data(),
                                              count_table_.data(), tensors, stream);
    } else {
      cuda_kernels::accumulate_bf16_gradients(gradient_table_.data(), accumulator_table_.data(), count_table_.data(),
                                              tensors, stream);
    }
    CUDA_CHECK(cudaMemcpyAsync(losses_.data + micro_batches_, backend_.device_address(loss_), sizeof(float),
                               cudaMemcpyDeviceToHost, stream));
    ++micro_batches_;
  }

  StepMetrics measure() override {
    cudaStream_t stream = backend_.stream();
    const int tensors = static_cast<int>(entries_.size());
    const float max_norm = static_cast<float>(config_.max_grad_norm);
    if (bf16_gradients_) {
      cuda::global_grad_norm(norm_result_.data(), norm_partials_.data(), bf16_accumulator_table_.data(),
                             count_table_.data(), tensors, max_norm, stream);
    } else {
      cuda::global_grad_norm(norm_result_.data(), norm_partials_.data(), accumulator_table_.data(), count_table_.data(),
                             tensors, max_norm, stream);
    }
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
    // norm_result_[1] is the clip factor global_grad_norm left on the device (1 when
    // max_grad_norm is 0), read by the kernels: no host round trip.
    optimizer_->step(step, norm_result_.data() + 1, stream);
    zero_accumulators(stream);
    if (fp8_) cuda::fp8_roll_history(fp8_device(), fp8_->shape.sites, fp8_->shape.history, step.step, stream);
  }

private:
  float* fp8_device() { return static_cast<float*>(backend_.device_address(fp8_->tensor)); }

  void zero_accumulators(cudaStream_t stream) {
    accumulators_.zero(stream);
    bf16_accumulators_.zero(stream);
  }

  // The trainable parameters as the optimizer sees them; master and gradient pointers are filled
  // once those buffers exist.
  std::vector<DeviceParameter> describe_parameters() {
    std::vector<DeviceParameter> parameters;
    for (const Trainable& entry : entries_) {
      const WeightView& weight = weights_[entry.weight];
      DeviceParameter parameter;
      parameter.name = weight.name;
      parameter.rows = weight.shape.size() == 2 ? weight.shape[0] : 1;
      parameter.cols = weight.shape.size() == 2 ? weight.shape[1] : entry.count;
      parameter.weight = static_cast<__nv_bfloat16*>(backend_.device_address(entry.parameter));
      parameter.apply_weight_decay = applies_weight_decay(weight.name);
      parameter.is_hidden_matrix = is_hidden_matrix(weight.name, weight.shape);
      parameters.push_back(std::move(parameter));
    }
    return parameters;
  }

  // The out-of-memory report for what the trainer adds to the plan, made before allocating it.
  void check_free_memory(int64_t trainable_elements, size_t optimizer_bytes) const {
    const size_t elements = static_cast<size_t>(trainable_elements);
    const size_t master_bytes = bf16_master_ ? 0 : elements * sizeof(float);
    const size_t accumulator_bytes = elements * (bf16_gradients_ ? sizeof(__nv_bfloat16) : sizeof(float));
    const size_t needed = master_bytes + accumulator_bytes + optimizer_bytes;
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > free_bytes) {
      const runtime::DeviceMemoryReport& plan = backend_.memory_report();
      const std::string masters =
          bf16_master_ ? fmt::format("no master copy (master_dtype: bf16 saves {:.2f} GiB)", gib(elements * sizeof(float)))
                       : fmt::format("fp32 master weights {:.2f} GiB", gib(master_bytes));
      const std::string accumulators =
          bf16_gradients_ ? fmt::format("bf16 gradient accumulators {:.2f} GiB (gradient_dtype: bf16 saves {:.2f} GiB)",
                                        gib(accumulator_bytes), gib(elements * sizeof(float) - accumulator_bytes))
                          : fmt::format("fp32 gradient accumulators {:.2f} GiB", gib(accumulator_bytes));
      fail_user("training needs {:.2f} GiB more GPU memory than the plan's {:.2f} GiB ({}, {}, {} optimizer state "
                "{:.2f} GiB), but GPU {} has only {:.2f} GiB free of {:.2f} GiB. Train fewer parameters (LoRA, a smaller "
                "lora_rank), use optimizer: adamw_8bit, master_dtype: bf16 or gradient_dtype: bf16, or reduce the "
                "micro-batch or sequence length",
                gib(needed), gib(plan.required_bytes + plan.scratch_bytes), masters, accumulators,
                to_string(config_.optimizer), gib(optimizer_bytes), plan.device, gib(free_bytes), gib(total_bytes));
    }
  }
  static double gib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

  struct Trainable {
    size_t weight;               // index into weights_
    graph::TensorId parameter;   // the bf16 weight in the plan
    graph::TensorId gradient;    // its bf16 gradient
    int64_t offset;              // into the master and accumulator buffers
    int64_t count;
  };

  static void copy(float* destination, const float* source, int64_t count, cudaMemcpyKind kind, cudaStream_t stream) {
    CUDA_CHECK(cudaMemcpyAsync(destination, source, static_cast<size_t>(count) * sizeof(float), kind, stream));
  }

  const compiler::ExecutionPlan& plan_;
  const Config& config_;
  int64_t max_micro_batches_;
  bool bf16_master_, bf16_gradients_;
  runtime::CudaBackend backend_;
  graph::TensorId loss_ = graph::kNoTensor;
  std::vector<std::unique_ptr<float[]>> host_values_;
  std::vector<WeightView> weights_, trainable_;
  std::vector<graph::TensorId> ids_;
  std::vector<Trainable> entries_;
  cuda::DeviceBuffer<float> master_, accumulators_, norm_result_, norm_partials_;  // master_ / accumulators_: fp32 only
  cuda::DeviceBuffer<__nv_bfloat16> bf16_accumulators_;  // gradient_dtype bf16 only
  std::unique_ptr<DeviceOptimizer> optimizer_;
  cuda::DeviceBuffer<__nv_bfloat16*> gradient_table_;
  cuda::DeviceBuffer<float*> accumulator_table_;
  cuda::DeviceBuffer<__nv_bfloat16*> bf16_accumulator_table_;
  cuda::DeviceBuffer<int64_t> count_table_;
  PinnedFloats losses_, norm_;
  std::optional<Fp8State> fp8_;   // fp8_hybrid's scaling state (in the plan's parameters)
  std::vector<float> fp8_host_;   // its host copy: zeros at the start, what checkpoints read and restore
  int64_t micro_batches_ = 0;
};

}  // namespace

std::unique_ptr<TrainingDevice> make_cuda_training_device(const TrainingDeviceSetup& setup) {
  return std::make_unique<CudaTrainingDevice>(setup);
}

}  // namespace surogate::train
