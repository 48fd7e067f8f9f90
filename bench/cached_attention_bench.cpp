// Decode attention over a KV cache (cuda::cached_attention_append + cached_attention_forward) on
// Qwen3-8B's heads (32 query, 8 kv, head_dim 128, bf16): the achieved bandwidth of the cache read
// against the GPU's (H200: about 4.8 TB/s), and one prefill chunk's throughput.
//
//   cached_attention_bench [--rows 1,8,32,64] [--lengths 1024,4096,16384,32768] [--repeats 50]
//                          [--chunk 512] [--q_heads 32] [--kernel auto|rows]
//
// Decode: every row holds `length` tokens and brings one, so a launch reads rows · (length + 1) ·
// 8 heads · 128 · 2 bytes of keys and as many of values. Launches cycle over enough copies of the
// slots to pass 256 MiB, so the cache comes from DRAM, not the L2. Prints µs per call (append +
// attention, the op as the binder runs it), GB/s of K + V read and the split count the launcher
// picked, or `rows` where the many-rows kernel ran (`--kernel rows`: it alone, whatever the row
// count; `auto`: as cached_attention_forward picks). Prefill: one row, `chunk` new tokens after `length` − chunk cached, TFLOP/s of the
// 4 · Hq · D flops per (query, visible key). Built beside the CUDA tests
// (tests/runtime_cuda/CMakeLists.txt); run on the GPU machine.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/cached_attention.h"
#include "cuda_timing.h"

namespace {

using surogate::cuda::CachedAttentionShape;
using surogate::cuda::DeviceBuffer;

constexpr int kKvHeads = 8, kHeadDim = 128;
int kQueryHeads = 32;  // --q_heads (Qwen3-1.7B: 16)
bool kForceRows = false;  // --kernel rows

struct Timing {
  double microseconds = 0.0;
  int splits = 0;
};

// `rows` rows of `sequence` new tokens (all real) after `held` cached ones, over `copies` sets of
// slots (launch i uses set i % copies).
Timing time_call(int64_t rows, int64_t sequence, int64_t held, int copies, int repeats) {
  const CachedAttentionShape shape{.batch = rows, .sequence = sequence, .slots = rows * copies,
                                   .capacity = held + sequence, .q_heads = kQueryHeads, .kv_heads = kKvHeads,
                                   .head_dim = kHeadDim};
  const int splits = surogate::cuda::cached_attention_splits(shape);
  const size_t cache = static_cast<size_t>(shape.slots * shape.capacity * kKvHeads * kHeadDim);
  const size_t tokens = static_cast<size_t>(rows * sequence);
  DeviceBuffer<__nv_bfloat16> k_cache(cache), v_cache(cache), q(tokens * kQueryHeads * kHeadDim),
      out(tokens * kQueryHeads * kHeadDim), k(tokens * kKvHeads * kHeadDim), v(tokens * kKvHeads * kHeadDim);
  for (DeviceBuffer<__nv_bfloat16>* buffer : {&k_cache, &v_cache, &q, &k, &v}) {
    CUDA_CHECK(cudaMemset(buffer->data(), 0x3c, buffer->bytes()));  // bf16 0x3c3c ≈ 0.0115
  }
  DeviceBuffer<float> workspace(static_cast<size_t>(surogate::cuda::cached_attention_workspace_floats(shape, splits)));
  std::vector<DeviceBuffer<int32_t>> slot_sets;
  for (int copy = 0; copy < copies; ++copy) {
    std::vector<int32_t> slots(static_cast<size_t>(rows));
    std::iota(slots.begin(), slots.end(), static_cast<int32_t>(copy * rows));
    slot_sets.push_back(surogate::cuda::to_device(slots));
  }
  const auto lengths = surogate::cuda::to_device(std::vector<int32_t>(static_cast<size_t>(rows), static_cast<int32_t>(held)));
  const auto fresh = surogate::cuda::to_device(std::vector<int32_t>(static_cast<size_t>(rows), static_cast<int32_t>(sequence)));
  Timing timing;
  timing.splits = splits;
  const bool rows_kernel = sequence == 1 && (kForceRows || surogate::cuda::cached_attention_uses_rows_kernel(shape));
  if (rows_kernel) timing.splits = 0;
  timing.microseconds = surogate::bench::time_launches(repeats, copies, [&](int copy) {
    const int32_t* slots = slot_sets[static_cast<size_t>(copy)].data();
    surogate::cuda::cached_attention_append(k_cache.data(), v_cache.data(), k.data(), v.data(), slots, lengths.data(),
                                            fresh.data(), shape, nullptr);
    if (rows_kernel) {
      surogate::cuda::cached_attention_rows_forward(out.data(), q.data(), k_cache.data(), v_cache.data(), slots,
                                                    lengths.data(), fresh.data(), shape, nullptr);
    } else {
      surogate::cuda::cached_attention_forward(out.data(), workspace.data(), q.data(), k_cache.data(), v_cache.data(),
                                               slots, lengths.data(), fresh.data(), shape, splits, nullptr);
    }
  });
  return timing;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> rows_list = {1, 8, 32, 64}, lengths = {1024, 4096, 16384, 32768};
  int repeats = 50;
  int64_t chunk = 512;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--rows") rows_list = surogate::bench::parse_list(argv[i + 1]);
    else if (flag == "--lengths") lengths = surogate::bench::parse_list(argv[i + 1]);
    else if (flag == "--repeats") repeats = std::atoi(argv[i + 1]);
    else if (flag == "--chunk") chunk = std::stoll(argv[i + 1]);
    else if (flag == "--q_heads") kQueryHeads = std::atoi(argv[i + 1]);
    else if (flag == "--kernel" && (std::string(argv[i + 1]) == "rows" || std::string(argv[i + 1]) == "auto")) {
      kForceRows = std::string(argv[i + 1]) == "rows";
    }
    else {
      std::fprintf(stderr, "cached_attention_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::printf("%-8s %-8s %8s %10s %8s %8s\n", "rows", "length", "splits", "us", "GB/s", "of 4.8T");
  for (const int64_t rows : rows_list) {
    for (const int64_t length : lengths) {
      const int64_t bytes = 2 * rows * (length + 1) * kKvHeads * kHeadDim * 2;  // K and V, bf16
      const int copies = static_cast<int>(std::max<int64_t>(1, (int64_t{256} << 20) / bytes + 1));
      const Timing timing = time_call(rows, 1, length, copies, repeats);
      const double gigabytes_per_second = bytes / timing.microseconds / 1e3;
      const std::string kernel = timing.splits == 0 ? "rows" : std::to_string(timing.splits);
      std::printf("%-8lld %-8lld %8s %10.2f %8.1f %7.1f%%\n", static_cast<long long>(rows),
                  static_cast<long long>(length), kernel.c_str(), timing.microseconds, gigabytes_per_second,
                  100.0 * gigabytes_per_second / 4800.0);
    }
  }
  for (const int64_t length : lengths) {
    if (length < chunk) continue;
    const int64_t held = length - chunk;
    const Timing timing = time_call(1, chunk, held, 1, repeats);
    // Query t sees held + t + 1 keys: 4 · Hq · D flops each (scores and the weighted sum).
    const double pairs = static_cast<double>(chunk) * static_cast<double>(held) + chunk * (chunk + 1) / 2.0;
    const double tflops = 4.0 * kQueryHeads * kHeadDim * pairs / timing.microseconds / 1e6;
    std::printf("prefill chunk %lld after %lld cached: %.2f us, %.2f TFLOP/s, %d splits\n",
                static_cast<long long>(chunk), static_cast<long long>(held), timing.microseconds, tflops, timing.splits);
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  return 0;
}
