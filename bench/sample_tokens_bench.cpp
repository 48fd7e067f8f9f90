// Generation's token choice on the GPU over [rows, 151936] bf16 logits (Qwen3's vocabulary; in
// the L2 as after the LM head): greedy_tokens beside sample_tokens with each kind of option —
// temperature alone (GRPO's usual rollout), top_k 20, top_p 0.95, both (Qwen3's generation
// config), min_p 0.05, and a repetition penalty over a 512-token context — as µs per call (the
// whole batch), the ratio to greedy, and the logits' GB/s.
//
//   sample_tokens_bench [--rows 1,8,64,256] [--repeats 50]
//
// Built beside the CUDA tests (tests/runtime_cuda/CMakeLists.txt).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/token_draw.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/greedy_tokens.h"
#include "cuda/kernels/sample_tokens.h"
#include "cuda_timing.h"

namespace {

using surogate::RowSampling;
using surogate::cuda::DeviceBuffer;
using Bf16 = __nv_bfloat16;

constexpr int64_t kVocab = 151936;
constexpr int64_t kContext = 512;

struct Scenario {
  const char* name;
  float temperature, penalty;
  int32_t top_k;
  float top_p, min_p;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> row_counts{1, 8, 64, 256};
  int repeats = 50;
  if (!surogate::bench::parse_rows_and_repeats(argc, argv, "sample_tokens_bench", row_counts, repeats)) return 2;
  const std::vector<Scenario> scenarios = {
      {"temperature 0.9", 0.9f, 1.0f, 0, 1.0f, 0.0f},         {"top_k 20", 0.9f, 1.0f, 20, 1.0f, 0.0f},
      {"top_p 0.95", 0.9f, 1.0f, 0, 0.95f, 0.0f},            {"top_k 20 + top_p 0.95", 0.6f, 1.0f, 20, 0.95f, 0.0f},
      {"min_p 0.05", 0.9f, 1.0f, 0, 1.0f, 0.05f},            {"penalty 1.1, 512 context", 0.9f, 1.1f, 0, 1.0f, 0.0f},
  };
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(kVocab - 1));
  for (int64_t rows : row_counts) {
    std::vector<Bf16> host(static_cast<size_t>(rows * kVocab));
    for (Bf16& value : host) value = __float2bfloat16(normal(random));
    const DeviceBuffer<Bf16> logits = surogate::cuda::to_device(host);
    std::vector<int32_t> context(static_cast<size_t>(rows * kContext));
    for (int32_t& id : context) id = token(random);
    const DeviceBuffer<int32_t> device_context = surogate::cuda::to_device(context);
    DeviceBuffer<int32_t> tokens(static_cast<size_t>(rows));
    const double bytes = static_cast<double>(rows * kVocab) * sizeof(Bf16);
    const double greedy = surogate::bench::time_launches(repeats, 1, [&](int) {
      surogate::cuda::greedy_tokens(tokens.data(), logits.data(), rows, kVocab, nullptr);
    });
    std::printf("\n%lld rows of %lld bf16 logits\n%-28s %9.1f us  %6.2fx  %7.1f GB/s\n", static_cast<long long>(rows),
                static_cast<long long>(kVocab), "greedy_tokens", greedy, 1.0, bytes / greedy * 1e-3);
    for (const Scenario& s : scenarios) {
      std::vector<RowSampling> params(static_cast<size_t>(rows));
      for (size_t r = 0; r < params.size(); ++r) {
        params[r] = {s.temperature, s.penalty, s.top_k, s.top_p, s.min_p > 0 ? std::log(s.min_p) : -INFINITY,
                     static_cast<uint32_t>(r), 1000 + r};
      }
      const DeviceBuffer<RowSampling> device_params = surogate::cuda::to_device(params);
      const int64_t width = s.penalty != 1.0f ? kContext : 0;
      const double us = surogate::bench::time_launches(repeats, 1, [&](int) {
        surogate::cuda::sample_tokens(tokens.data(), logits.data(), rows, kVocab, device_params.data(),
                                      device_context.data(), width, nullptr);
      });
      std::printf("%-28s %9.1f us  %6.2fx  %7.1f GB/s\n", s.name, us, us / greedy, bytes / us * 1e-3);
    }
  }
  return 0;
}
