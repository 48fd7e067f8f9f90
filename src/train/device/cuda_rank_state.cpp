// One GPU's training state; see cuda_rank_state.h.
#include "train/device/cuda_rank_state.h"
#include "cuda/kernels/gradient_accumulate.h"
#include "cuda/kernels/weights_from_masters.h"
#include "models/decoder_graph.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/bfloat16.h"
#include "core/error.h"
#include "cuda/kernels/fp8_quantize.h"
#include "cuda/kernels/grad_norm.h"
#include "ops/parallel_for.h"
#include "runtime/cuda_attention_path.h"
#include "train/device/staged_optimizer.h"

namespace surogate::train {
namespace {

// Offsets into the master and accumulator buffers are rounded up to 4 elements, so every tensor
// starts 16-byte (fp32) or 8-byte (bf16) aligned (the grad-norm and optimizer kernels load
// 4-element vectors).
int64_t aligned(int64_t count) { return (count + 3) / 4 * 4; }

double gib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

void copy(float* destination, const float* source, int64_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  CUDA_CHECK(cudaMemcpyAsync(destination, source, static_cast<size_t>(count) * sizeof(float), kind, stream));
}

// Two halves of pinned host memory for upload_weights(): a half is refilled only after the copy
// that last read it has run (one event per half).
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

}  // namespace

std::vector<size_t> CudaTrainableLayout::unit_sizes() const {
  std::vector<size_t> sizes;
  for (size_t i = 0; i < entries.size(); ++i) {
    const int64_t end = i + 1 < entries.size() ? entries[i + 1].offset : total;
    sizes.push_back(static_cast<size_t>(end - entries[i].offset));
  }
  return sizes;
}

std::vector<TrainableExtent> CudaTrainableLayout::extents(size_t first, size_t end) const {
  const std::vector<size_t> sizes = unit_sizes();
  std::vector<TrainableExtent> result;
  for (size_t i = first; i < end; ++i) {
    result.push_back({entries[i].offset, static_cast<int64_t>(sizes[i]), entries[i].count});
  }
  return result;
}

CudaTrainableLayout cuda_trainable_layout(const compiler::ExecutionPlan& plan, std::span<const models::ParameterSpec> specs) {
  CudaTrainableLayout layout;
  for (size_t index = 0; index < specs.size(); ++index) {
    const models::ParameterSpec& spec = specs[index];
    graph::TensorId id = plan.tensor(spec.name);
    const graph::TensorType& type = plan.graph.tensor(id).type;
    if (type.dtype != DType::BF16 && type.dtype != DType::F16) {
      fail_user("the CUDA trainer needs a bf16 or fp16 plan, but parameter '{}' is {}", spec.name,
                dtype_safetensors_name(type.dtype));
    }
    if (index > 0 && type.dtype != layout.dtype) {
      fail_user("the CUDA trainer needs every parameter in one 16-bit dtype, but parameter '{}' is {} and '{}' {}",
                spec.name, dtype_safetensors_name(type.dtype), specs.front().name, dtype_safetensors_name(layout.dtype));
    }
    layout.dtype = type.dtype;
    layout.ids.push_back(id);
    auto gradient = plan.parameter_gradients.find(id);
    if (gradient == plan.parameter_gradients.end()) continue;  // frozen (LoRA base)
    layout.entries.push_back({index, id, gradient->second, layout.total, type.numel()});
    layout.total += aligned(type.numel());
  }
  SUROGATE_CHECK(!layout.entries.empty(), "the model has trainable parameters");
  return layout;
}

CudaHostWeights cuda_host_weights(std::span<const models::ParameterSpec> specs, const CudaTrainableLayout& layout) {
  CudaHostWeights host;
  host.values.reserve(specs.size());
  for (const models::ParameterSpec& spec : specs) {
    const auto count = static_cast<size_t>(graph::shape_numel(spec.shape));
    host.values.push_back(std::make_unique_for_overwrite<float[]>(count));
    host.weights.push_back({spec.name, spec.shape, std::span<float>(host.values.back().get(), count)});
  }
  for (const CudaTrainable& entry : layout.entries) {
    host.trainable.push_back(host.weights[entry.weight]);
    host.pinned.emplace_back(host.trainable.back().values.data(), host.trainable.back().values.size_bytes());
  }
  return host;
}

CudaRankState::Pinned::Pinned(size_t count) {
  CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data), count * sizeof(float)));
}
CudaRankState::Pinned::~Pinned() {
  if (data) cudaFreeHost(data);
}

CudaRankState::CudaRankState(const TrainingDeviceSetup& setup, const CudaTrainableLayout& layout, size_t first, size_t end,
                             const CudaWeightShard* shard, bool shard_accumulators)
    : config_(*setup.config), layout_(layout), shard_(shard),
      max_micro_batches_(std::max<int64_t>(1, config_.schedule.gradient_accumulation_steps)),
      bf16_master_(config_.precision.master_dtype == MasterDtype::Bf16),
      bf16_gradients_(config_.precision.gradient_dtype == GradientDtype::Bf16),
      fp16_(layout.dtype == DType::F16),
      backend_(setup.cuda_ops != nullptr ? *setup.cuda_ops : runtime::builtin_cuda_ops()),
      losses_(static_cast<size_t>(2 * max_micro_batches_)), norm_(2) {
  SUROGATE_CHECK(!config_.precision.gradient_dtype || *config_.precision.gradient_dtype == GradientDtype::Fp32 ||
                     bf16_gradients_ || config_.precision.recipe == Recipe::Fp8Hybrid,
                 "gradient_dtype fp8 without recipe fp8_hybrid was rejected when the configuration was loaded");
  SUROGATE_CHECK(first <= end && end <= layout.entries.size(), "the optimizer's tensors are trainable tensors");
  // fp16 training runs the single-GPU dense path with fp32 masters and accumulators
  // (train/device/backend_selection.cpp refuses the rest before the weights load).
  SUROGATE_CHECK(!fp16_ || (!bf16_master_ && !bf16_gradients_ && shard == nullptr && !shard_accumulators),
                 "fp16 training keeps fp32 masters and accumulators on one GPU");
  const compiler::ExecutionPlan& plan = *setup.plan;
  // The attention's path is chosen when the plans bind (runtime/cuda_attention_path.h): before the
  // first load, and the evaluator's plans bind under the same settings.
  runtime::AttentionSettings attention = runtime::attention_settings();
  attention.deterministic = config_.kernels.deterministic_attention;
  runtime::set_attention_settings(attention);
  backend_.load(plan, *setup.registry);
  backend_.set_time_breakdown(config_.logging.debug_time_breakdown);
  backend_.set_cuda_graphs(config_.kernels.use_cuda_graphs);
  // A plan whose loss is not an fp32 scalar (a pipeline stage before the last, whose bf16 "loss" only
  // seeds its backward) reports none.
  if (plan.loss != graph::kNoTensor && plan.graph.tensor(plan.loss).type.dtype == DType::F32) loss_ = plan.loss;
  router_aux_loss_ = plan.graph.find_tensor(models::kRouterAuxLoss).value_or(graph::kNoTensor);
  // The trainable parameters as the optimizer sees them; master and gradient pointers are filled
  // once those buffers exist.
  std::vector<DeviceParameter> parameters;
  for (size_t i = first; i < end; ++i) {
    const CudaTrainable& entry = layout.entries[i];
    const models::ParameterSpec& spec = setup.specs[entry.weight];
    DeviceParameter parameter;
    parameter.name = spec.name;
    parameter.rows = spec.shape.size() == 2 ? spec.shape[0] : 1;
    parameter.cols = spec.shape.size() == 2 ? spec.shape[1] : entry.count;
    // ZeRO-3: the rank's own copy (the plan's weight is a gather buffer).
    parameter.weight = shard_ ? shard_->weight(entry.parameter)
                              : static_cast<__nv_bfloat16*>(backend_.device_address(entry.parameter));
    SUROGATE_CHECK(parameter.weight != nullptr, "a rank keeps the weights it steps");
    // fp16: the optimizer updates the fp32 masters only; step() rewrites the fp16 weights from them.
    if (fp16_) parameter.weight = nullptr;
    parameter.apply_weight_decay = applies_weight_decay(spec.name);
    parameter.is_hidden_matrix = is_hidden_matrix(spec.name, spec.shape);
    parameters.push_back(std::move(parameter));
  }
  // The masters: every trainable tensor's, or under ZeRO-3 only those of the optimizer's tensors
  // [first, end), a contiguous run of the flat layout starting at master_base_.
  int64_t master_count = layout.total;
  if (shard_) {
    SUROGATE_CHECK(!bf16_master_, "ZeRO-3 keeps fp32 masters");
    master_base_ = first < layout.entries.size() ? layout.entries[first].offset : layout.total;
    master_count = (end < layout.entries.size() ? layout.entries[end].offset : layout.total) - master_base_;
  }
  std::vector<TrainableExtent> extents = layout.extents(first, end);
  for (TrainableExtent& extent : extents) extent.offset -= master_base_;
  offload_ = plan_host_offload(config_, extents, setup.offload_chunk_bytes);
  // Offloaded state takes no GPU memory but NorMuon's workspaces; staging takes two slots.
  size_t optimizer_bytes = 0;
  if (!parameters.empty()) {
    optimizer_bytes = !offload_.optimizer ? device_optimizer_bytes(config_, parameters)
                      : config_.optimizer.algorithm == surogate::Optimizer::NorMuon
                          ? device_normuon_workspace_bytes(parameters)
                          : 0;
  }
  master_count_ = master_count;
  // The accumulators: every trainable tensor's, or under ZeRO-2/3 only those of [first, end).
  accumulator_count_ = layout.total;
  if (shard_accumulators) {
    accumulator_base_ = first < layout.entries.size() ? layout.entries[first].offset : layout.total;
    accumulator_count_ = (end < layout.entries.size() ? layout.entries[end].offset : layout.total) - accumulator_base_;
  }
  check_free_memory(optimizer_bytes + offload_.staging_bytes());
  const auto total = static_cast<size_t>(accumulator_count_);
  const bool write_combined = offload_.write_combined;
  if (!bf16_master_ && offload_.masters) {
    host_master_ = cuda::PinnedHostBuffer<float>(static_cast<size_t>(master_count), write_combined);
    masters_host_ = host_master_.data();
    masters_ = host_master_.device_data();
  } else if (!bf16_master_) {
    master_ = cuda::DeviceBuffer<float>(static_cast<size_t>(master_count));
    masters_host_ = masters_ = master_.data();
  }
  if (bf16_gradients_ && offload_.gradients) {
    host_bf16_accumulators_ = cuda::PinnedHostBuffer<__nv_bfloat16>(total, write_combined);
    bf16_accumulators_data_ = host_bf16_accumulators_.device_data();
  } else if (bf16_gradients_) {
    bf16_accumulators_ = cuda::DeviceBuffer<__nv_bfloat16>(total);
    bf16_accumulators_data_ = bf16_accumulators_.data();
  } else if (offload_.gradients) {
    host_accumulators_ = cuda::PinnedHostBuffer<float>(total, write_combined);
    accumulators_data_ = host_accumulators_.device_data();
  } else {
    accumulators_ = cuda::DeviceBuffer<float>(total);
    accumulators_data_ = accumulators_.data();
  }
  zero_accumulators();
  norm_result_ = cuda::DeviceBuffer<float>(2);
  norm_partials_ = cuda::DeviceBuffer<float>(static_cast<size_t>(cuda::kGradNormBlocks) * layout.entries.size());
  // The pointer tables of the multi-tensor kernels, built once.
  std::vector<__nv_bfloat16*> bf16_gradients, bf16_accumulators, weights;
  std::vector<float*> accumulators, masters;
  std::vector<int64_t> counts;
  for (size_t i = 0; i < layout.entries.size(); ++i) {
    const CudaTrainable& entry = layout.entries[i];
    const bool has_master = !shard_ || (i >= first && i < end);  // ZeRO-3: the optimizer's tensors only
    const bool has_accumulator = !shard_accumulators || (i >= first && i < end);  // ZeRO-2/3: likewise
    const int64_t accumulator_offset = entry.offset - accumulator_base_;
    bf16_gradients.push_back(static_cast<__nv_bfloat16*>(backend_.device_address(entry.gradient)));
    weights.push_back(shard_ ? shard_->weight(entry.parameter)
                             : static_cast<__nv_bfloat16*>(backend_.device_address(entry.parameter)));
    if (bf16_gradients_) bf16_accumulators.push_back(has_accumulator ? bf16_accumulators_data_ + accumulator_offset : nullptr);
    else accumulators.push_back(has_accumulator ? accumulators_data_ + accumulator_offset : nullptr);
    if (!bf16_master_) masters.push_back(has_master ? masters_ + (entry.offset - master_base_) : nullptr);
    counts.push_back(entry.count);
  }
  gradient_table_ = cuda::to_device(bf16_gradients);
  weight_table_ = cuda::to_device(weights);
  if (bf16_gradients_) bf16_accumulator_table_ = cuda::to_device(bf16_accumulators);
  else accumulator_table_ = cuda::to_device(accumulators);
  if (!bf16_master_) master_table_ = cuda::to_device(masters);
  counts_ = cuda::GradientCounts(counts);
  if (fp16_) {  // the same addresses, as the fp16 tensors they are
    std::vector<__half*> fp16_gradients, fp16_weights;
    for (__nv_bfloat16* pointer : bf16_gradients) fp16_gradients.push_back(reinterpret_cast<__half*>(pointer));
    for (__nv_bfloat16* pointer : weights) fp16_weights.push_back(reinterpret_cast<__half*>(pointer));
    fp16_gradient_table_ = cuda::to_device(fp16_gradients);
    fp16_weight_table_ = cuda::to_device(fp16_weights);
  }
  // A staged optimizer takes the masters' host addresses (it copies them into its slots).
  float* optimizer_masters = offload_.staged ? masters_host_ : masters_;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const int64_t offset = layout.entries[first + i].offset;
    if (!bf16_master_) parameters[i].master = optimizer_masters + (offset - master_base_);
    if (bf16_gradients_) parameters[i].gradient_bf16 = bf16_accumulators_data_ + (offset - accumulator_base_);
    else parameters[i].gradient = accumulators_data_ + (offset - accumulator_base_);
  }
  fp8_copies_ = fp8_weight_copies(plan);
  if (!fp8_copies_.empty()) fp8_amax_ = cuda::DeviceBuffer<float>(1);
  if (parameters.empty()) return;
  if (offload_.staged) {
    optimizer_ = make_staged_optimizer(config_, std::move(parameters), offload_, masters_host_);
  } else {
    const StateMemory memory{offload_.optimizer ? StateMemory::Place::HostMapped : StateMemory::Place::Device,
                             write_combined, nullptr};
    optimizer_ = make_device_optimizer(config_, std::move(parameters), memory);
  }
}

void CudaRankState::refresh_fp8_weight_copies() {
  for (const Fp8WeightCopy& copy : fp8_copies_) {
    cuda::fp8_quantize_weight(static_cast<const __nv_bfloat16*>(backend_.device_address(copy.weight)), copy.rows,
                              copy.columns, fp8_amax_.data(), static_cast<uint8_t*>(backend_.device_address(copy.codes)),
                              static_cast<uint8_t*>(backend_.device_address(copy.transposed)),
                              static_cast<float*>(backend_.device_address(copy.scale_inv)), backend_.stream());
  }
}

void* CudaRankState::accumulators() {
  zero_stale_accumulators();
  return bf16_gradients_ ? static_cast<void*>(bf16_accumulators_data_) : static_cast<void*>(accumulators_data_);
}

void CudaRankState::accumulate(std::span<const runtime::InputBinding> inputs, bool add_gradients_now) {
  if (micro_batches_ >= max_micro_batches_) {
    fail_user("internal: more micro-batches than gradient_accumulation_steps ({}) in one step", max_micro_batches_);
  }
  cudaStream_t stream = backend_.stream();
  backend_.execute(inputs);
  if (add_gradients_now) add_gradients(0, layout_.entries.size());
  if (loss_ != graph::kNoTensor) {
    CUDA_CHECK(cudaMemcpyAsync(losses_.data + micro_batches_, backend_.device_address(loss_), sizeof(float),
                               cudaMemcpyDeviceToHost, stream));
  } else {
    losses_.data[micro_batches_] = 0.0f;
  }
  if (router_aux_loss_ != graph::kNoTensor) {  // the second half of losses_ holds the aux losses
    CUDA_CHECK(cudaMemcpyAsync(losses_.data + max_micro_batches_ + micro_batches_,
                               backend_.device_address(router_aux_loss_), sizeof(float), cudaMemcpyDeviceToHost, stream));
  }
  ++micro_batches_;
}

size_t CudaRankState::accumulator_bytes() const {
  return static_cast<size_t>(accumulator_count_) * dtype_size_bytes(accumulator_dtype());
}

void CudaRankState::add_gradients(size_t first, size_t end) {
  SUROGATE_CHECK(first <= end && end <= layout_.entries.size(), "gradients of trainable tensors");
  SUROGATE_CHECK(accumulator_count_ == layout_.total, "sharded accumulators take reduced pieces only (sharded_gradients.h)");
  if (first == end) return;
  cudaStream_t stream = backend_.stream();
  // Stale accumulators (deferred zeroing) are overwritten when every tensor is added at once.
  const bool overwrite = accumulators_stale_ && first == 0 && end == layout_.entries.size();
  if (!overwrite) zero_stale_accumulators();
  accumulators_stale_ = false;
  if (fp16_) {
    cuda::accumulate_fp16_gradients(fp16_gradient_table_.data(), accumulator_table_.data(), counts_, first, end,
                                            stream, overwrite);
  } else if (bf16_gradients_) {
    cuda::accumulate_bf16_gradients(gradient_table_.data(), bf16_accumulator_table_.data(), counts_, first, end,
                                            stream, overwrite);
  } else {
    cuda::accumulate_bf16_gradients(gradient_table_.data(), accumulator_table_.data(), counts_, first, end,
                                            stream, overwrite);
  }
}

float* CudaRankState::master(size_t index) {
  SUROGATE_CHECK(!bf16_master_ && index < layout_.entries.size(), "trainable tensors have fp32 masters");
  return masters_host_ + (layout_.entries[index].offset - master_base_);
}

double CudaRankState::loss_sum() {
  double sum = 0.0;
  for (int64_t i = 0; i < micro_batches_; ++i) sum += losses_.data[i];
  router_aux_loss_sum_.reset();
  if (router_aux_loss_ != graph::kNoTensor) {
    router_aux_loss_sum_ = 0.0;
    for (int64_t i = 0; i < micro_batches_; ++i) *router_aux_loss_sum_ += losses_.data[max_micro_batches_ + i];
  }
  micro_batches_ = 0;
  return sum;
}

void CudaRankState::gradient_norm(size_t first, size_t end) {
  zero_stale_accumulators();
  cudaStream_t stream = backend_.stream();
  const int tensors = static_cast<int>(end - first);
  const float max_norm = static_cast<float>(config_.optimizer.max_grad_norm);
  if (tensors == 0) {
    norm_.data[0] = 0.0f;
    set_clip_factor(0.0);
    return;
  }
  if (bf16_gradients_) {
    cuda::global_grad_norm(norm_result_.data(), norm_partials_.data(), bf16_accumulator_table_.data() + first,
                           counts_.counts() + first, tensors, max_norm, stream);
  } else {
    cuda::global_grad_norm(norm_result_.data(), norm_partials_.data(), accumulator_table_.data() + first,
                           counts_.counts() + first, tensors, max_norm, stream);
  }
  CUDA_CHECK(cudaMemcpyAsync(norm_.data, norm_result_.data(), 2 * sizeof(float), cudaMemcpyDeviceToHost, stream));
}

void CudaRankState::set_clip_factor(double norm) {
  // global_grad_norm's finish, in the same float arithmetic (cuda/kernels/grad_norm.cu).
  const float value = static_cast<float>(norm);
  const float max_norm = static_cast<float>(config_.optimizer.max_grad_norm);
  norm_.data[1] = max_norm > 0.0f ? std::fmin(1.0f, max_norm / (value + 1e-6f)) : 1.0f;
  CUDA_CHECK(cudaMemcpyAsync(norm_result_.data() + 1, norm_.data + 1, sizeof(float), cudaMemcpyHostToDevice,
                             backend_.stream()));
}

void CudaRankState::scale_clip_factor(double gradient_scale) {
  // clip_slot_gradients' coefficient (cpu_parameters.h) on the norm read back by norm(), in the
  // float arithmetic of global_grad_norm's finish: the norm measured is the loss-scaled one.
  const float unscaled = static_cast<float>(static_cast<double>(norm()) * gradient_scale);
  const float max_norm = static_cast<float>(config_.optimizer.max_grad_norm);
  const float clip = max_norm > 0.0f ? std::fmin(1.0f, max_norm / (unscaled + 1e-6f)) : 1.0f;
  norm_.data[1] = static_cast<float>(gradient_scale) * clip;
  CUDA_CHECK(cudaMemcpyAsync(norm_result_.data() + 1, norm_.data + 1, sizeof(float), cudaMemcpyHostToDevice,
                             backend_.stream()));
}

void CudaRankState::step(const OptimizerStep& step) {
  // The clip factor gradient_norm() (or set_clip_factor / scale_clip_factor) left on the device (1
  // when max_grad_norm is 0) is read by the kernels: no host round trip.
  zero_stale_accumulators();
  if (optimizer_) optimizer_->step(step, clip_factor(), backend_.stream());
  // fp16: the optimizer stepped the fp32 masters only; the fp16 weights follow (round to nearest).
  if (fp16_) refresh_weights_from_masters(0, layout_.entries.size());
}

void CudaRankState::zero_accumulators() {
  accumulators_stale_ = true;
  if (!defer_zeroing_) zero_stale_accumulators();
}

void CudaRankState::zero_stale_accumulators() {
  if (!accumulators_stale_) return;
  accumulators_stale_ = false;
  // The mapped host accumulators too (offload_grads): the memset runs on the GPU, over the link.
  const size_t total = static_cast<size_t>(accumulator_count_);
  if (accumulators_data_) CUDA_CHECK(cudaMemsetAsync(accumulators_data_, 0, total * sizeof(float), backend_.stream()));
  if (bf16_accumulators_data_) {
    CUDA_CHECK(cudaMemsetAsync(bf16_accumulators_data_, 0, total * sizeof(__nv_bfloat16), backend_.stream()));
  }
}

void CudaRankState::refresh_weights_from_masters(size_t first, size_t end) {
  SUROGATE_CHECK(!bf16_master_ && !shard_, "weights are refreshed from every fp32 master only without ZeRO-3");
  if (first == end) return;
  if (fp16_) {
    cuda::weights_from_masters(fp16_weight_table_.data() + first, master_table_.data() + first,
                                       counts_.counts() + first, static_cast<int>(end - first), backend_.stream());
    return;
  }
  cuda::weights_from_masters(weight_table_.data() + first, master_table_.data() + first,
                                     counts_.counts() + first, static_cast<int>(end - first), backend_.stream());
}

void CudaRankState::synchronize() { CUDA_CHECK(cudaStreamSynchronize(backend_.stream())); }

// Every weight is rounded to bf16 (fp16 in an fp16 plan) on all cores into one of two pinned staging buffers while the
// other one's copy to the device runs (an 8B model: 16 GB through 64 MiB halves, at the host
// link's speed instead of one core's rounding plus a pageable copy per tensor).
void CudaRankState::upload_weights(std::span<const WeightView> weights) {
  SUROGATE_CHECK(!shard_, "ZeRO-3 uploads through the data-parallel device");
  cudaStream_t stream = backend_.stream();
  constexpr size_t kStagingElements = size_t{32} << 20;  // 64 MiB of bf16 per half
  UploadStaging staging(kStagingElements);
  int half = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    std::span<const float> values = weights[i].values;
    auto* device = static_cast<uint16_t*>(backend_.device_address(layout_.ids[i]));
    for (size_t first = 0; first < values.size(); first += kStagingElements) {
      const size_t count = std::min(kStagingElements, values.size() - first);
      uint16_t* bits = staging.wait_for(half);
      constexpr int64_t kBlock = int64_t{1} << 20;
      const auto blocks = static_cast<int64_t>((count + kBlock - 1) / kBlock);
      ops::parallel_for(blocks, [&](int64_t block) {
        const size_t begin = static_cast<size_t>(block * kBlock);
        const size_t end = std::min(count, begin + static_cast<size_t>(kBlock));
        if (fp16_) {
          for (size_t k = begin; k < end; ++k) bits[k] = float_to_f16(values[first + k]);
        } else {
          for (size_t k = begin; k < end; ++k) bits[k] = float_to_bf16(values[first + k]);
        }
      });
      CUDA_CHECK(cudaMemcpyAsync(device + first, bits, count * sizeof(uint16_t), cudaMemcpyHostToDevice, stream));
      staging.issued(half, stream);
      half ^= 1;
    }
  }
  // A bf16 master is the bf16 weight just written (exact when the host values came from a
  // download or a checkpoint of this device).
  for (size_t index = 0; index < layout_.entries.size() && !bf16_master_; ++index) {
    const CudaTrainable& entry = layout_.entries[index];
    copy(masters_host_ + entry.offset, weights[entry.weight].values.data(), entry.count, cudaMemcpyDefault, stream);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

void CudaRankState::download_trainable(std::span<const WeightView> weights) {
  SUROGATE_CHECK(!shard_, "ZeRO-3 downloads through the data-parallel device");
  cudaStream_t stream = backend_.stream();
  for (const CudaTrainable& entry : layout_.entries) {
    std::span<float> values = weights[entry.weight].values;
    if (bf16_master_) {
      // The bf16 weights widened to fp32, exactly (what checkpoints and outputs save).
      std::vector<uint16_t> bits(values.size());
      backend_.read(entry.parameter, std::as_writable_bytes(std::span<uint16_t>(bits)));
      for (size_t k = 0; k < bits.size(); ++k) values[k] = bf16_to_float(bits[k]);
    } else {
      copy(values.data(), masters_host_ + entry.offset, entry.count, cudaMemcpyDefault, stream);
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

// The out-of-memory report for what the trainer adds to the plan, made before allocating it.
void CudaRankState::check_free_memory(size_t optimizer_bytes) const {
  const auto elements = static_cast<size_t>(accumulator_count_);
  const size_t master_bytes = bf16_master_ || offload_.masters ? 0 : static_cast<size_t>(master_count_) * sizeof(float);
  const size_t accumulator_bytes =
      offload_.gradients ? 0 : elements * (bf16_gradients_ ? sizeof(__nv_bfloat16) : sizeof(float));
  const size_t needed = master_bytes + accumulator_bytes + optimizer_bytes;
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (needed <= free_bytes) return;
  const runtime::DeviceMemoryReport& plan = backend_.memory_report();
  const std::string masters =
      bf16_master_       ? fmt::format("no master copy (master_dtype: bf16 saves {:.2f} GiB)",
                                       gib(static_cast<size_t>(layout_.total) * sizeof(float)))
      : offload_.masters ? std::string("fp32 master weights in host memory (offload_master)")
                         : fmt::format("fp32 master weights {:.2f} GiB", gib(master_bytes));
  const std::string accumulators =
      offload_.gradients ? std::string("gradient accumulators in host memory (offload_grads)")
      : bf16_gradients_  ? fmt::format("bf16 gradient accumulators {:.2f} GiB (gradient_dtype: bf16 saves {:.2f} GiB)",
                                    gib(accumulator_bytes), gib(elements * sizeof(float) - accumulator_bytes))
                         : fmt::format("fp32 gradient accumulators {:.2f} GiB", gib(accumulator_bytes));
  fail_user(
      "training needs {:.2f} GiB more GPU memory than the plan's {:.2f} GiB ({}, {}, {} optimizer state and "
      "offload staging {:.2f} GiB), but GPU {} has only {:.2f} GiB free of {:.2f} GiB. Train fewer parameters "
      "(LoRA, a smaller lora_rank), use optimizer: adamw_8bit, master_dtype: bf16 or gradient_dtype: bf16, "
      "offload_optimizer / offload_master / offload_grads: true, or reduce the micro-batch or sequence length",
      gib(needed), gib(plan.required_bytes + plan.scratch_bytes), masters, accumulators,
      to_string(config_.optimizer.algorithm), gib(optimizer_bytes), plan.device, gib(free_bytes), gib(total_bytes));
}

ShardCopies cuda_shard_copies(CudaRankState& state, size_t first_entry) {
  return {nullptr, [&state, first_entry](size_t first, size_t end) {
            state.refresh_weights_from_masters(first_entry + first, first_entry + end);
          }};
}

void check_visible_gpus(int first_device, int count, const std::string& gpus_source) {
  int visible = 0;
  CUDA_CHECK(cudaGetDeviceCount(&visible));
  if (visible < first_device + count) {
    fail_user("{}: GPUs {}-{} asked for, {} visible", gpus_source, first_device, first_device + count - 1, visible);
  }
}

}  // namespace surogate::train
