// Bandwidth of the FP8 transposes (cuda::fp8_transpose) and the weights' FP8 copies
// (cuda::fp8_quantize_weight) on the shapes of one fp8_hybrid layer, beside a device-to-device
// copy of the same bytes (the ceiling a transpose could reach):
//
//   fp8_transpose_bench [--tokens 4096] [--shapes 2048,1024,6144,...] [--repeats 50]
//
// Each shape is [tokens, columns] codes (the weight gradient's operands) transposed; the weights are
// [columns, 2048] bf16. Every launch reads a different one of enough buffers to pass 256 MiB, so
// the input comes from DRAM as it mostly does in training (the producer ran a layer earlier in the
// L2's terms). Prints one line per shape: µs per launch and TB/s (bytes read + written), and the
// copy's. Built beside the CUDA tests (tests/runtime_cuda/CMakeLists.txt); run on the GPU machine.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_timing.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/fp8_quantize.h"

namespace {

using surogate::bench::parse_list;
using surogate::bench::time_launches;
using surogate::cuda::DeviceBuffer;

}  // namespace

int main(int argc, char** argv) {
  int64_t tokens = 4096, weight_columns = 2048;
  int repeats = 50;
  std::vector<int64_t> shapes = {2048, 1024, 6144, 4096, 8192};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tokens") tokens = std::stoll(argv[i + 1]);
    else if (flag == "--shapes") shapes = parse_list(argv[i + 1]);
    else if (flag == "--repeats") repeats = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "fp8_transpose_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::printf("%-22s %10s %8s %10s %8s\n", "shape", "us", "TB/s", "copy us", "TB/s");
  for (const int64_t columns : shapes) {
    const int64_t bytes = tokens * columns;
    const int buffers = static_cast<int>(std::max<int64_t>(2, (int64_t{256} << 20) / bytes + 1));
    std::vector<DeviceBuffer<uint8_t>> in, out;
    for (int b = 0; b < buffers; ++b) {
      in.emplace_back(static_cast<size_t>(bytes));
      out.emplace_back(static_cast<size_t>(bytes));
      CUDA_CHECK(cudaMemset(in.back().data(), b + 1, static_cast<size_t>(bytes)));
    }
    const double transpose = time_launches(repeats, buffers, [&](int b) {
      surogate::cuda::fp8_transpose(in[b].data(), tokens, columns, out[b].data(), nullptr);
    });
    const double copy = time_launches(repeats, buffers, [&](int b) {
      CUDA_CHECK(cudaMemcpyAsync(out[b].data(), in[b].data(), static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice));
    });
    std::printf("transpose %5lldx%-6lld %10.2f %8.2f %10.2f %8.2f\n", static_cast<long long>(tokens),
                static_cast<long long>(columns), transpose, 2.0 * bytes / transpose / 1e6, copy,
                2.0 * bytes / copy / 1e6);
  }
  for (const int64_t rows : shapes) {
    const int64_t count = rows * weight_columns;
    const int buffers = static_cast<int>(std::max<int64_t>(2, (int64_t{256} << 20) / (3 * count) + 1));
    std::vector<DeviceBuffer<__nv_bfloat16>> w;
    std::vector<DeviceBuffer<uint8_t>> codes, transposed;
    DeviceBuffer<float> amax(1), scale_inv(1);
    for (int b = 0; b < buffers; ++b) {
      w.emplace_back(static_cast<size_t>(count));
      codes.emplace_back(static_cast<size_t>(count));
      transposed.emplace_back(static_cast<size_t>(count));
      CUDA_CHECK(cudaMemset(w.back().data(), 0x3c, static_cast<size_t>(2 * count)));
    }
    const double quantize = time_launches(repeats, buffers, [&](int b) {
      surogate::cuda::fp8_quantize_weight(w[b].data(), rows, weight_columns, amax.data(), codes[b].data(),
                                          transposed[b].data(), scale_inv.data(), nullptr);
    });
    std::printf("weight %5lldx%-9lld %10.2f %8.2f\n", static_cast<long long>(rows),
                static_cast<long long>(weight_columns), quantize, 4.0 * count / quantize / 1e6);
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  return 0;
}
