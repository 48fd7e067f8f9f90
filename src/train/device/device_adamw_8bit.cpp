// 8-bit AdamW on the device (cuda/kernels/adamw_8bit.h): the moments as one byte per element
// plus one fp32 absmax per 2048 elements, the CPU adamw_8bit's code books and block layout.
// State tensors as the CPU optimizer: `<name>.exp_avg.codes` U8 [size], `<name>.exp_avg.absmax`
// F32 [blocks], and the same two for `.exp_avg_sq`.
#include <cstdint>

#include "core/error.h"
#include "cuda/kernels/adamw_8bit.h"
#include "train/device/device_optimizer.h"
#include "train/optim/quantization_map.h"

namespace surogate::train {
namespace {

static_assert(cuda::kAdamW8bitBlock == kQuantizationBlockSize, "the device and CPU 8-bit blocks must agree");

class DeviceAdamW8bit final : public DeviceOptimizer {
public:
  DeviceAdamW8bit(std::vector<DeviceParameter> parameters, const AdamWSettings& settings, uint64_t rounding_seed,
                  const StateMemory& memory)
      : parameters_(std::move(parameters)), settings_(settings), rounding_seed_(rounding_seed) {
    const auto& signed_map = dynamic_quantization_map(true);
    const auto& unsigned_map = dynamic_quantization_map(false);
    // Fresh state decodes to zero: the code of 0.0 with absmax 0.
    const uint8_t signed_zero = nearest_code(signed_map, 0.0f), unsigned_zero = nearest_code(unsigned_map, 0.0f);
    for (const DeviceParameter& parameter : parameters_) {
      const int64_t blocks = quantization_blocks(parameter.size());
      Offsets offsets{first_codes_.add(parameter.size(), signed_zero), first_absmax_.add(blocks, 0.0f)};
      second_codes_.add(parameter.size(), unsigned_zero);
      second_absmax_.add(blocks, 0.0f);
      offsets_.push_back(offsets);
    }
    for (auto* state : {&first_absmax_, &second_absmax_}) state->allocate(memory);
    for (auto* state : {&first_codes_, &second_codes_}) state->allocate(memory);
    codes_ = cuda::to_device(std::vector{cuda::adamw_8bit_codes(signed_map.data(), unsigned_map.data())});

    // The launch tables, built once: every pointer is fixed for the optimizer's life.
    std::vector<cuda::AdamW8bitTensor> tensors;
    std::vector<cuda::AdamW8bitJob> jobs;
    for (size_t i = 0; i < parameters_.size(); ++i) {
      const DeviceParameter& p = parameters_[i];
      const Offsets& o = offsets_[i];
      tensors.push_back({p.weight, p.master, first_codes_.device(o.codes), first_absmax_.device(o.absmax),
                         second_codes_.device(o.codes), second_absmax_.device(o.absmax), p.gradient, p.size(),
                         p.apply_weight_decay ? 1 : 0, p.gradient_bf16});
      const int64_t blocks = quantization_blocks(p.size());
      SUROGATE_CHECK(blocks <= INT32_MAX, "parameter '{}' has too many 8-bit blocks", p.name);
      for (int64_t block = 0; block < blocks; ++block) {
        jobs.push_back({static_cast<int32_t>(i), static_cast<int32_t>(block)});
      }
    }
    tensors_ = cuda::to_device(tensors);
    jobs_ = cuda::to_device(jobs);
  }

  std::string_view name() const override { return "adamw_8bit"; }

  std::vector<StateTensor> state_tensors() override {
    std::vector<StateTensor> tensors;
    for (size_t i = 0; i < parameters_.size(); ++i) {
      const DeviceParameter& p = parameters_[i];
      const Offsets& o = offsets_[i];
      const int64_t blocks = quantization_blocks(p.size());
      const size_t codes = static_cast<size_t>(p.size()), absmax = static_cast<size_t>(blocks) * sizeof(float);
      tensors.push_back({p.name + ".exp_avg.codes", DType::U8, {p.size()}, first_codes_.host(o.codes), codes});
      tensors.push_back({p.name + ".exp_avg.absmax", DType::F32, {blocks}, first_absmax_.host(o.absmax), absmax});
      tensors.push_back({p.name + ".exp_avg_sq.codes", DType::U8, {p.size()}, second_codes_.host(o.codes), codes});
      tensors.push_back({p.name + ".exp_avg_sq.absmax", DType::F32, {blocks}, second_absmax_.host(o.absmax), absmax});
    }
    return tensors;
  }

  void upload(cudaStream_t stream) override {
    upload_states(stream, first_codes_, second_codes_, first_absmax_, second_absmax_);
  }
  void download(cudaStream_t stream) override {
    download_states(stream, first_codes_, second_codes_, first_absmax_, second_absmax_);
  }

  void step(const OptimizerStep& step, const float* clip, cudaStream_t stream) override {
    // Decay applies per tensor (the table's `decays`), so the step carries lr · wd for all; the
    // rounding key is the step's (a bf16 master's tensor key comes from its table index).
    cuda::adamw_8bit_update(tensors_.data(), jobs_.data(), static_cast<int64_t>(jobs_.size()), codes_.data(), clip,
                            adamw_kernel_step(settings_, step, true, device_rounding_step_key(rounding_seed_, step)),
                            stream);
  }

private:
  struct Offsets {
    int64_t codes;   // into both code states (same sizes)
    int64_t absmax;  // into both absmax states
  };

  std::vector<DeviceParameter> parameters_;
  AdamWSettings settings_;
  uint64_t rounding_seed_;
  MirroredState<uint8_t> first_codes_, second_codes_;
  MirroredState<float> first_absmax_, second_absmax_;
  std::vector<Offsets> offsets_;
  cuda::DeviceBuffer<cuda::AdamW8bitCodes> codes_;  // both code books and their nearest-code tables
  cuda::DeviceBuffer<cuda::AdamW8bitTensor> tensors_;
  cuda::DeviceBuffer<cuda::AdamW8bitJob> jobs_;
};

}  // namespace

std::unique_ptr<DeviceOptimizer> make_device_adamw_8bit(std::vector<DeviceParameter> parameters,
                                                        const AdamWSettings& settings, uint64_t rounding_seed,
                                                        const StateMemory& memory) {
  return std::make_unique<DeviceAdamW8bit>(std::move(parameters), settings, rounding_seed, memory);
}

}  // namespace surogate::train
