// cuda::adamw_8bit_update against a host computation of the same formula, bit for bit: codes,
// absmax, fp32 masters and bf16 weights after two steps from random codes and absmax. Every
// kernel operation is one round-to-nearest fp32 operation and this host build has no fused
// multiply-add, so the host's m and v equal the kernel's exactly and its codes are
// train::nearest_code of them (the kernel's nearest-code table is checked against nearest_code
// over all floats by tests/train/test_nearest_code_table.cpp; this checks the kernel around it).
//
// The tensors cover the kernel's paths: vector (8 elements per thread) and scalar (a count that is
// not a multiple of 8, a partial last block, pointers off 16-byte alignment: a master, gradient or
// weight one element in, codes three bytes in), fp32 and bf16 gradients, a device clip factor or
// none, fp32 masters with and without bf16 weights, bf16 masters (stochastic rounding), a tensor
// without weight decay, a block whose moments are all zero, and more jobs than the grid has
// blocks (a 1.2M-element tensor), so blocks walk several jobs.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.h"
#include "core/stochastic_rounding.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/adamw_8bit.h"
#include "cuda/test_helpers.h"
#include "train/optim/quantization_map.h"

namespace surogate::train {
namespace {

constexpr int64_t kBlock = cuda::kAdamW8bitBlock;

struct Spec {
  int64_t count;
  bool bf16_gradient = false;
  bool with_params = true;  // fp32 master only
  bool decays = true;
  int misaligned = 0;       // 1: master / gradient / weights one element in; 2: codes three bytes in
  bool zero_block = false;  // block 0 starts at absmax 0 with zero gradients
};

// One tensor on both sides. Device buffers are one element (three bytes for codes) longer, so a
// misaligned tensor can start inside them.
struct Tensor {
  Spec spec;
  std::vector<float> master, gradient;  // master: the fp32 master, or the bf16 weight widened
  std::vector<uint16_t> params;
  std::vector<uint8_t> first_codes, second_codes;
  std::vector<float> first_absmax, second_absmax;
  cuda::DeviceBuffer<float> d_master, d_gradient;
  cuda::DeviceBuffer<__nv_bfloat16> d_params, d_gradient_bf16;
  cuda::DeviceBuffer<uint8_t> d_first_codes, d_second_codes;
  cuda::DeviceBuffer<float> d_first_absmax, d_second_absmax;
  int element_offset() const { return spec.misaligned == 1 ? 1 : 0; }
  int code_offset() const { return spec.misaligned == 2 ? 3 : 0; }
};

template <typename T>
cuda::DeviceBuffer<T> upload_at(const std::vector<T>& values, int offset) {
  std::vector<T> padded(values.size() + 3, T{});
  std::copy(values.begin(), values.end(), padded.begin() + offset);
  return cuda::to_device(padded);
}

template <typename T>
std::vector<T> download_at(const cuda::DeviceBuffer<T>& buffer, int offset, size_t count) {
  const std::vector<T> all = buffer.download();
  return std::vector<T>(all.begin() + offset, all.begin() + offset + static_cast<std::ptrdiff_t>(count));
}

std::vector<__nv_bfloat16> as_bf16(const std::vector<uint16_t>& bits) {
  std::vector<__nv_bfloat16> out(bits.size());
  std::memcpy(out.data(), bits.data(), bits.size() * sizeof(uint16_t));
  return out;
}

std::unique_ptr<Tensor> make_tensor(const Spec& spec, bool fp32_master, uint32_t seed) {
  auto t = std::make_unique<Tensor>();
  t->spec = spec;
  const size_t n = static_cast<size_t>(spec.count);
  const size_t blocks = static_cast<size_t>(quantization_blocks(spec.count));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.01f, 1.0f);
  t->master.resize(n);
  t->gradient.resize(n);
  t->params.resize(n);
  t->first_codes.resize(n);
  t->second_codes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float weight = 0.05f * normal(rng);
    t->params[i] = float_to_bf16(weight);
    t->master[i] = fp32_master ? weight : bf16_to_float(t->params[i]);
    // Gradients exact in bf16, so both gradient dtypes carry the same values; magnitudes over decades.
    t->gradient[i] = bf16_to_float(float_to_bf16(0.01f * normal(rng) * std::pow(10.0f, -float(rng() % 4))));
    t->first_codes[i] = static_cast<uint8_t>(rng());
    t->second_codes[i] = static_cast<uint8_t>(rng());
  }
  t->first_absmax.resize(blocks);
  t->second_absmax.resize(blocks);
  for (size_t b = 0; b < blocks; ++b) {
    t->first_absmax[b] = 0.01f * uniform(rng);
    t->second_absmax[b] = 1e-4f * uniform(rng);
  }
  if (spec.zero_block) {
    t->first_absmax[0] = t->second_absmax[0] = 0.0f;
    std::fill(t->gradient.begin(), t->gradient.begin() + std::min<int64_t>(spec.count, kBlock), 0.0f);
  }
  const int e = t->element_offset(), c = t->code_offset();
  if (fp32_master) t->d_master = upload_at(t->master, e);
  if (!fp32_master || spec.with_params) t->d_params = upload_at(as_bf16(t->params), e);
  if (spec.bf16_gradient) {
    std::vector<uint16_t> bits(n);
    for (size_t i = 0; i < n; ++i) bits[i] = float_to_bf16(t->gradient[i]);
    t->d_gradient_bf16 = upload_at(as_bf16(bits), e);
  } else {
    t->d_gradient = upload_at(t->gradient, e);
  }
  t->d_first_codes = upload_at(t->first_codes, c);
  t->d_second_codes = upload_at(t->second_codes, c);
  t->d_first_absmax = cuda::to_device(t->first_absmax);
  t->d_second_absmax = cuda::to_device(t->second_absmax);
  return t;
}

// The kernel's step on the host, operation for operation (adamw_8bit.cu's update_elements).
void host_step(Tensor& t, int tensor_index, bool fp32_master, const float* clip, const cuda::AdamWStep& s) {
  const auto& signed_map = dynamic_quantization_map(true);
  const auto& unsigned_map = dynamic_quantization_map(false);
  const uint64_t key = rounding_parameter_key(s.rounding_key, static_cast<uint64_t>(tensor_index));
  const float decay = t.spec.decays ? s.decay : 0.0f;
  const int64_t n = t.spec.count;
  std::vector<float> m(static_cast<size_t>(kBlock)), v(static_cast<size_t>(kBlock));
  for (int64_t block = 0; block < quantization_blocks(n); ++block) {
    const int64_t begin = block * kBlock, end = std::min(n, begin + kBlock);
    float m_max = 0.0f, v_max = 0.0f;
    for (int64_t i = begin; i < end; ++i) {
      const size_t k = static_cast<size_t>(i - begin), u = static_cast<size_t>(i);
      const float g = clip ? t.gradient[u] * *clip : t.gradient[u];
      const float m_old = signed_map[t.first_codes[u]] * t.first_absmax[static_cast<size_t>(block)];
      const float v_old = unsigned_map[t.second_codes[u]] * t.second_absmax[static_cast<size_t>(block)];
      m[k] = s.beta1 * m_old + (1.0f - s.beta1) * g;
      v[k] = s.beta2 * v_old + ((1.0f - s.beta2) * g) * g;
      const float update = (s.step_size * m[k]) / (std::sqrt(v[k]) * s.second_correction + s.epsilon);
      const float p = t.master[u] - (update + decay * t.master[u]);
      if (fp32_master) {
        t.master[u] = p;
        t.params[u] = float_to_bf16(p);
      } else {
        t.params[u] = stochastic_round_bf16(p, rounding_bits(key, static_cast<uint64_t>(i)));
        t.master[u] = bf16_to_float(t.params[u]);
      }
      m_max = std::fmax(m_max, std::fabs(m[k]));
      v_max = std::fmax(v_max, v[k]);
    }
    t.first_absmax[static_cast<size_t>(block)] = m_max;
    t.second_absmax[static_cast<size_t>(block)] = v_max;
    const float m_inverse = m_max > 0.0f ? 1.0f / m_max : 0.0f;
    const float v_inverse = v_max > 0.0f ? 1.0f / v_max : 0.0f;
    for (int64_t i = begin; i < end; ++i) {
      const size_t k = static_cast<size_t>(i - begin), u = static_cast<size_t>(i);
      t.first_codes[u] = nearest_code(signed_map, m[k] * m_inverse);
      t.second_codes[u] = nearest_code(unsigned_map, v[k] * v_inverse);
    }
  }
}

template <typename T>
size_t count_differences(const std::vector<T>& got, const std::vector<T>& want) {
  size_t differences = 0;
  for (size_t i = 0; i < want.size(); ++i) differences += std::memcmp(&got[i], &want[i], sizeof(T)) != 0;
  return differences;
}

void run(bool fp32_master, bool clip) {
  SCOPED_TRACE(std::string(fp32_master ? "fp32 masters" : "bf16 masters") + (clip ? ", clip factor" : ""));
  std::vector<Spec> specs = {
      {3 * kBlock + 5},                                  // partial last block, count % 8 != 0
      {2 * kBlock, true},                                // bf16 gradients, vectors throughout
      {1000, false, false, false},                       // one partial block, no weights, no decay
      {13, true, true, true, 1},                         // tiny, misaligned elements
      {kBlock + 64, false, true, true, 2},               // misaligned codes
      {kBlock + 8, false, true, true, 0, true},          // a zero block
      {600 * kBlock + 8, true},                          // more jobs than the grid
  };
  if (!fp32_master) {
    for (Spec& spec : specs) spec.with_params = true;
  }
  std::vector<std::unique_ptr<Tensor>> tensors;
  std::vector<cuda::AdamW8bitTensor> table;
  std::vector<cuda::AdamW8bitJob> jobs;
  for (size_t i = 0; i < specs.size(); ++i) {
    tensors.push_back(make_tensor(specs[i], fp32_master, 100 + static_cast<uint32_t>(i)));
    Tensor& t = *tensors.back();
    const int e = t.element_offset(), c = t.code_offset();
    cuda::AdamW8bitTensor entry;
    entry.params = t.d_params.data() ? t.d_params.data() + e : nullptr;
    entry.master = t.d_master.data() ? t.d_master.data() + e : nullptr;
    entry.first_codes = t.d_first_codes.data() + c;
    entry.second_codes = t.d_second_codes.data() + c;
    entry.first_absmax = t.d_first_absmax.data();
    entry.second_absmax = t.d_second_absmax.data();
    entry.grad = t.spec.bf16_gradient ? nullptr : t.d_gradient.data() + e;
    entry.grad_bf16 = t.spec.bf16_gradient ? t.d_gradient_bf16.data() + e : nullptr;
    entry.count = t.spec.count;
    entry.decays = t.spec.decays ? 1 : 0;
    table.push_back(entry);
    for (int64_t b = 0; b < quantization_blocks(t.spec.count); ++b) {
      jobs.push_back({static_cast<int32_t>(i), static_cast<int32_t>(b)});
    }
  }
  const auto& signed_map = dynamic_quantization_map(true);
  const auto& unsigned_map = dynamic_quantization_map(false);
  cuda::DeviceBuffer<cuda::AdamW8bitCodes> codes =
      cuda::to_device(std::vector{cuda::adamw_8bit_codes(signed_map.data(), unsigned_map.data())});
  cuda::DeviceBuffer<cuda::AdamW8bitTensor> d_table = cuda::to_device(table);
  cuda::DeviceBuffer<cuda::AdamW8bitJob> d_jobs = cuda::to_device(jobs);
  const float clip_factor = 0.5f;
  cuda::DeviceBuffer<float> d_clip = cuda::to_device(std::vector<float>{clip_factor});

  for (int step = 1; step <= 2; ++step) {
    cuda::AdamWStep s;
    s.step_size = static_cast<float>(1e-2 / (1.0 - std::pow(0.9, step)));
    s.second_correction = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(0.999, step)));
    s.decay = 1e-3f;
    s.rounding_key = rounding_step_key(77, static_cast<uint64_t>(step));
    cuda::adamw_8bit_update(d_table.data(), d_jobs.data(), static_cast<int64_t>(jobs.size()), codes.data(),
                            clip ? d_clip.data() : nullptr, s, nullptr);
    for (size_t i = 0; i < tensors.size(); ++i) {
      host_step(*tensors[i], static_cast<int>(i), fp32_master, clip ? &clip_factor : nullptr, s);
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());

  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = *tensors[i];
    SCOPED_TRACE("tensor " + std::to_string(i) + " of " + std::to_string(t.spec.count) + " elements");
    const size_t n = static_cast<size_t>(t.spec.count);
    const int e = t.element_offset(), c = t.code_offset();
    EXPECT_EQ(count_differences(download_at(t.d_first_codes, c, n), t.first_codes), 0u) << "first-moment codes";
    EXPECT_EQ(count_differences(download_at(t.d_second_codes, c, n), t.second_codes), 0u) << "second-moment codes";
    EXPECT_EQ(count_differences(t.d_first_absmax.download(), t.first_absmax), 0u) << "first-moment absmax";
    EXPECT_EQ(count_differences(t.d_second_absmax.download(), t.second_absmax), 0u) << "second-moment absmax";
    if (fp32_master) EXPECT_EQ(count_differences(download_at(t.d_master, e, n), t.master), 0u) << "masters";
    if (t.d_params.data()) {
      const std::vector<__nv_bfloat16> got = download_at(t.d_params, e, n);
      std::vector<uint16_t> bits(n);
      std::memcpy(bits.data(), got.data(), n * sizeof(uint16_t));
      EXPECT_EQ(count_differences(bits, t.params), 0u) << "bf16 weights";
    }
    // The copies around a misaligned tensor are untouched (the kernel writes only its elements).
    if (e == 1 && t.d_master.data()) EXPECT_EQ(t.d_master.download()[0], 0.0f);
    if (c == 3) EXPECT_EQ(t.d_first_codes.download()[2], 0);
  }
}

TEST(AdamW8bitKernel, Fp32MastersMatchTheHostBitForBit) {
  SKIP_WITHOUT_GPU();
  run(true, true);
  run(true, false);
}

TEST(AdamW8bitKernel, Bf16MastersMatchTheHostBitForBit) {
  SKIP_WITHOUT_GPU();
  run(false, true);
  run(false, false);
}

}  // namespace
}  // namespace surogate::train
