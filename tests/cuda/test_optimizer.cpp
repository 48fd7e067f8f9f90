// AdamW update and the global gradient norm / clipping kernels vs float64 references.
// Tolerances: fp32 optimizer state 1e-5 relative (a few fp32 roundings per element); the bf16
// parameter copy must equal bf16(master) exactly; the norm 1e-5 relative and bitwise
// reproducible across runs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda/kernels/adamw.h"
#include "cuda/kernels/grad_norm.h"
#include "test_helpers.h"

namespace surogate::cuda::testing {
namespace {

TEST(CudaAdamW, MatchesReferenceWithClipScaleAndDecay) {
  SKIP_WITHOUT_GPU();
  for (int64_t count : {int64_t{1}, int64_t{1001}, int64_t{4096}, int64_t{100003}}) {
    auto master = random_fp32(count, -1.0f, 1.0f), grad = random_fp32(count, -0.1f, 0.1f);
    auto m = random_fp32(count, -0.01f, 0.01f), v = random_fp32(count, 0.0f, 1e-3f);
    const float clip = 0.7f, lr = 1e-3f, weight_decay = 0.1f;
    const int step_number = 3;
    AdamWStep step;
    step.step_size = lr / (1.0f - std::pow(step.beta1, step_number));
    step.second_correction = 1.0f / std::sqrt(1.0f - std::pow(step.beta2, step_number));
    step.decay = lr * weight_decay;
    auto device_master = to_device(master), device_grad = to_device(grad), device_m = to_device(m),
         device_v = to_device(v), device_clip = to_device(std::vector<float>{clip});
    DeviceBuffer<Bf16> params(count);
    params.poison();
    adamw_update(bf16_ptr(params), device_master.data(), device_m.data(), device_v.data(), device_grad.data(),
                 device_clip.data(), count, step, nullptr);
    synchronize();
    std::vector<double> expected_master(count), expected_m(count), expected_v(count);
    for (int64_t i = 0; i < count; ++i) {
      const double g = double(grad[i]) * clip;
      expected_m[i] = step.beta1 * double(m[i]) + (1.0 - step.beta1) * g;
      expected_v[i] = step.beta2 * double(v[i]) + (1.0 - step.beta2) * g * g;
      expected_master[i] = master[i] * (1.0 - step.decay) -
                           step.step_size * expected_m[i] / (std::sqrt(expected_v[i]) * step.second_correction + step.epsilon);
    }
    const auto new_master = device_master.download();
    const std::string where = "count=" + std::to_string(count);
    EXPECT_LT(relative_error(new_master, expected_master), 1e-5) << where;
    EXPECT_LT(relative_error(device_m.download(), expected_m), 1e-5) << where;
    EXPECT_LT(relative_error(device_v.download(), expected_v), 1e-5) << where;
    const auto bits = params.download();
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(bits[i], float_to_bf16(new_master[i])) << where << " index " << i;
  }
}

// Every tensor in one launch gives what one launch per tensor gives, bit for bit: counts that are
// and are not multiples of 4 (vector and scalar paths), blocks that end inside a tensor, an empty
// tensor, fp32 and bf16 gradients, no bf16 copy, and a tensor without weight decay.
TEST(CudaAdamW, TensorsInOneLaunchEqualOneLaunchEach) {
  SKIP_WITHOUT_GPU();
  struct Spec {
    int64_t count;
    bool bf16_grad, has_params, decays;
  };
  const std::vector<Spec> specs = {{4096, false, true, true},   {1, true, true, true},     {0, false, true, true},
                                   {100003, true, true, false}, {65536, true, false, true}, {12, false, true, true},
                                   {20000, false, true, true}};
  AdamWStep step;
  step.step_size = 1e-3f / (1.0f - std::pow(step.beta1, 2.0f));
  step.second_correction = 1.0f / std::sqrt(1.0f - std::pow(step.beta2, 2.0f));
  step.decay = 1e-4f;
  const auto clip = to_device(std::vector<float>{0.8f});
  struct State {
    DeviceBuffer<float> master, m, v, grad;
    DeviceBuffer<Bf16> grad_bf16, params;
  };
  auto make = [&](const Spec& spec, uint32_t seed) {
    std::mt19937 generator(seed);
    auto values = [&](float low, float high) {
      std::uniform_real_distribution<float> distribution(low, high);
      std::vector<float> out(static_cast<size_t>(spec.count));
      for (float& x : out) x = distribution(generator);
      return out;
    };
    State state{to_device(values(-1.0f, 1.0f)), to_device(values(-0.01f, 0.01f)), to_device(values(0.0f, 1e-3f)),
                to_device(values(-0.1f, 0.1f)), device_bf16(values(-0.1f, 0.1f)), DeviceBuffer<Bf16>(spec.count)};
    state.params.poison();
    return state;
  };
  std::vector<State> separate, joined;
  std::vector<AdamWTensor> tensors;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& spec = specs[i];
    separate.push_back(make(spec, static_cast<uint32_t>(i)));
    joined.push_back(make(spec, static_cast<uint32_t>(i)));
    State& a = separate.back();
    AdamWStep own = step;
    if (!spec.decays) own.decay = 0.0f;
    __nv_bfloat16* params = spec.has_params ? bf16_ptr(a.params) : nullptr;
    if (spec.bf16_grad) {
      adamw_update(params, a.master.data(), a.m.data(), a.v.data(), bf16_ptr(a.grad_bf16), clip.data(), spec.count,
                   own, nullptr);
    } else {
      adamw_update(params, a.master.data(), a.m.data(), a.v.data(), a.grad.data(), clip.data(), spec.count, own,
                   nullptr);
    }
    State& b = joined.back();
    tensors.push_back({.params = spec.has_params ? bf16_ptr(b.params) : nullptr, .master = b.master.data(),
                       .first_moment = b.m.data(), .second_moment = b.v.data(),
                       .grad = spec.bf16_grad ? nullptr : b.grad.data(),
                       .grad_bf16 = spec.bf16_grad ? bf16_ptr(b.grad_bf16) : nullptr, .count = spec.count,
                       .decays = spec.decays});
  }
  const AdamWTensorTable table(tensors);
  adamw_update_tensors(table, clip.data(), step, nullptr);
  synchronize();
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string where = "tensor " + std::to_string(i) + " of " + std::to_string(specs[i].count);
    EXPECT_EQ(joined[i].master.download(), separate[i].master.download()) << where;
    EXPECT_EQ(joined[i].m.download(), separate[i].m.download()) << where;
    EXPECT_EQ(joined[i].v.download(), separate[i].v.download()) << where;
    if (specs[i].has_params) EXPECT_EQ(joined[i].params.download(), separate[i].params.download()) << where;
  }
}

TEST(CudaGradNorm, NormClipAndScaleDeterministic) {
  SKIP_WITHOUT_GPU();
  const std::vector<int64_t> counts = {1, 1000, 4097, 33, 300000};
  std::vector<std::vector<float>> host;
  std::vector<DeviceBuffer<float>> device;
  double sum = 0.0;
  for (int64_t count : counts) {
    host.push_back(random_fp32(count, -0.05f, 0.05f));
    for (float x : host.back()) sum += double(x) * x;
    device.push_back(to_device(host.back()));
  }
  std::vector<float*> pointers;
  for (auto& buffer : device) pointers.push_back(buffer.data());
  auto device_pointers = to_device(pointers);
  auto device_counts = to_device(counts);
  DeviceBuffer<float> partials(kGradNormBlocks * counts.size()), result(2);
  const double norm = std::sqrt(sum);
  const float max_norm = static_cast<float>(norm / 2);
  std::vector<float> first, second;
  for (auto* out : {&first, &second}) {
    result.poison();
    global_grad_norm(result.data(), partials.data(), device_pointers.data(), device_counts.data(),
                     static_cast<int>(counts.size()), max_norm, nullptr);
    synchronize();
    *out = result.download();
  }
  EXPECT_EQ(first, second) << "grad norm not bitwise reproducible";
  EXPECT_NEAR(first[0], norm, 1e-5 * norm);
  EXPECT_NEAR(first[1], max_norm / (norm + 1e-6), 1e-5);
  scale_gradients(device_pointers.data(), device_counts.data(), static_cast<int>(counts.size()), result.data() + 1,
                  nullptr);
  synchronize();
  for (size_t t = 0; t < counts.size(); ++t) {
    std::vector<double> expected(host[t].begin(), host[t].end());
    for (auto& x : expected) x *= first[1];
    EXPECT_LT(relative_error(device[t].download(), expected), 1e-6) << "tensor " << t;
  }
  // No clipping requested: the factor is exactly 1.
  global_grad_norm(result.data(), partials.data(), device_pointers.data(), device_counts.data(),
                   static_cast<int>(counts.size()), 0.0f, nullptr);
  synchronize();
  EXPECT_EQ(result.download()[1], 1.0f);
}

}  // namespace
}  // namespace surogate::cuda::testing
