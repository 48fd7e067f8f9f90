// A decode step's linear layers on Qwen3-8B's shapes (W [N, K] bf16): the small-M kernel
// (cuda/kernels/small_m_linear.h) beside cuBLASLt (cuda::Matmul, what the linear op ran before)
// at the same shape, as the achieved bandwidth of the weight read against the GPU's (H200: about
// 4.8 TB/s).
//
//   small_m_linear_bench [--rows 1,2,4,8] [--repeats 100]
//
// A launch reads N·K·2 bytes of weights (plus M·K·2 of x and writes M·N·2, counted too). Launches
// cycle over enough copies of the weights to pass 256 MiB, so W comes from DRAM, not the L2.
// Prints µs per call and GB/s for both, and the kernel's speed-up. Built beside the CUDA tests
// (tests/runtime_cuda/CMakeLists.txt); run on the GPU machine.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/small_m_linear.h"
#include "cuda/matmul.h"
#include "cuda_timing.h"

namespace {

using surogate::cuda::DeviceBuffer;

struct Layer {
  const char* name;
  int64_t out, in;
};

constexpr Layer kLayers[] = {{"q_proj/o_proj", 4096, 4096}, {"k_proj/v_proj", 1024, 4096},
                             {"gate/up_proj", 12288, 4096}, {"down_proj", 4096, 12288},
                             {"lm_head", 151936, 4096}};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> rows_list = {1, 2, 4, 8};
  int repeats = 100;
  if (!surogate::bench::parse_rows_and_repeats(argc, argv, "small_m_linear_bench", rows_list, repeats)) return 2;
  surogate::cuda::Matmul matmul;
  std::printf("%-14s %7s %7s %4s %10s %8s %7s %10s %8s %7s %8s\n", "layer", "N", "K", "M", "kernel us", "GB/s",
              "of 4.8T", "cublas us", "GB/s", "of 4.8T", "speedup");
  for (const Layer& layer : kLayers) {
    const int64_t weight_bytes = layer.out * layer.in * 2;
    const int copies = static_cast<int>(std::max<int64_t>(1, (int64_t{256} << 20) / weight_bytes + 1));
    std::vector<DeviceBuffer<__nv_bfloat16>> weights;
    for (int copy = 0; copy < copies; ++copy) {
      weights.emplace_back(static_cast<size_t>(layer.out * layer.in));
      CUDA_CHECK(cudaMemset(weights.back().data(), 0x3c, weights.back().bytes()));  // bf16 0x3c3c ≈ 0.0115
    }
    DeviceBuffer<__nv_bfloat16> x(static_cast<size_t>(surogate::cuda::kSmallMLinearMaxRows * layer.in)),
        out(static_cast<size_t>(surogate::cuda::kSmallMLinearMaxRows * layer.out));
    CUDA_CHECK(cudaMemset(x.data(), 0x3c, x.bytes()));
    for (const int64_t rows : rows_list) {
      const surogate::cuda::SmallMLinearShape shape{.rows = rows, .out = layer.out, .in = layer.in};
      const surogate::cuda::MatmulShape cublas{.m = rows, .n = layer.out, .k = layer.in, .transpose_b = true};
      const double kernel = surogate::bench::time_launches(repeats, copies, [&](int copy) {
        surogate::cuda::small_m_linear(out.data(), x.data(), weights[static_cast<size_t>(copy)].data(),
                                       static_cast<const __nv_bfloat16*>(nullptr),
                                       static_cast<const __nv_bfloat16*>(nullptr), shape, nullptr);
      });
      const double library = surogate::bench::time_launches(repeats, copies, [&](int copy) {
        matmul.run(cublas, out.data(), x.data(), weights[static_cast<size_t>(copy)].data(), nullptr, nullptr);
      });
      const double bytes = static_cast<double>(weight_bytes + rows * layer.in * 2 + rows * layer.out * 2);
      const double kernel_gbs = bytes / kernel / 1e3, library_gbs = bytes / library / 1e3;
      std::printf("%-14s %7lld %7lld %4lld %10.2f %8.1f %6.1f%% %10.2f %8.1f %6.1f%% %7.2fx\n", layer.name,
                  static_cast<long long>(layer.out), static_cast<long long>(layer.in), static_cast<long long>(rows),
                  kernel, kernel_gbs, 100.0 * kernel_gbs / 4800.0, library, library_gbs, 100.0 * library_gbs / 4800.0,
                  library / kernel);
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  return 0;
}
