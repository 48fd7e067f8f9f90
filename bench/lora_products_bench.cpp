// LoRA's rank-r products at many rows (a GRPO rollout's decode step: 512 rows; a training
// micro-batch: 4,096) on Qwen3-1.7B's and Qwen3-8B's shapes, through cuBLASLt (cuda::Matmul, what
// the linear op runs) with each of the heuristic's first algorithms, in one replayed CUDA graph;
// beside them the base product with and without the adapter's output as its addend (linear_add);
// then each adapter group of a layer (q/k/v, o, gate/up, down) through low_rank_products (the two
// kernels of cuda/kernels/low_rank_products.h) beside the cuBLASLt chain the unfused graph runs
// (one A product for the group, one B product each; its concat and split not counted).
//
//   lora_products_bench [--rows 512,4096] [--repeats 200]
//
// Per shape: µs per call for heuristic ranks 0..5 and the bytes moved (x read, the output written;
// the small weight counted too) as GB/s for the best. Built beside the CUDA tests
// (tests/runtime_cuda/CMakeLists.txt); run on the GPU machine.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/low_rank_products.h"
#include "cuda/matmul.h"
#include "cuda_timing.h"

namespace {

using surogate::cuda::DeviceBuffer;

struct Product {
  const char* name;
  int64_t out, in;
  bool addend = false;  // the base product reading an [M, out] addend (linear_add)
};

struct Model {
  const char* name;
  std::vector<Product> products;
};

// rank 16: A products write 16 (or the shared group's 48 / 32) columns, B products read 16.
const Model kModels[] = {
    {"qwen3-1.7b",
     {{"A q/k/v (48)", 48, 2048}, {"A o (16)", 16, 2048}, {"A gate/up (32)", 32, 2048}, {"A down (16)", 16, 6144},
      {"B q/o/down", 2048, 16}, {"B k/v", 1024, 16}, {"B gate/up", 6144, 16},
      {"base q", 2048, 2048}, {"base q + addend", 2048, 2048, true}, {"base gate", 6144, 2048},
      {"base gate + addend", 6144, 2048, true}}},
    {"qwen3-8b",
     {{"A q/k/v (48)", 48, 4096}, {"A o (16)", 16, 4096}, {"A gate/up (32)", 32, 4096}, {"A down (16)", 16, 12288},
      {"B q/o/down", 4096, 16}, {"B k/v", 1024, 16}, {"B gate/up", 12288, 16},
      {"base q", 4096, 4096}, {"base q + addend", 4096, 4096, true}}},
};

constexpr int kRanks = 6;

struct Group {
  const char* name;
  int64_t in;
  std::vector<int64_t> widths;  // one rank-16 adapter each
};

struct GroupModel {
  const char* name;
  std::vector<Group> groups;
};

const GroupModel kGroupModels[] = {
    {"qwen3-1.7b", {{"q/k/v", 2048, {2048, 1024, 1024}}, {"o", 2048, {2048}}, {"gate/up", 2048, {6144, 6144}}, {"down", 6144, {2048}}}},
    {"qwen3-8b", {{"q/k/v", 4096, {4096, 1024, 1024}}, {"o", 4096, {4096}}, {"gate/up", 4096, {12288, 12288}}, {"down", 12288, {4096}}}},
};

void time_groups(const std::vector<int64_t>& rows_list, int repeats) {
  surogate::cuda::Matmul matmul;
  std::printf("\n%-11s %-8s %5s %10s %10s %8s\n", "model", "group", "M", "fused us", "cublas us", "speedup");
  constexpr int64_t kRank = 16;
  for (const GroupModel& model : kGroupModels) {
    for (const Group& group : model.groups) {
      for (const int64_t rows : rows_list) {
        const int count = static_cast<int>(group.widths.size());
        const int64_t total = kRank * count;
        DeviceBuffer<__nv_bfloat16> x(static_cast<size_t>(rows * group.in)), a(static_cast<size_t>(total * group.in)),
            u(static_cast<size_t>(rows * total));
        DeviceBuffer<std::byte> partial(surogate::cuda::low_rank_products_scratch_bytes(rows, total, group.in));
        DeviceBuffer<int> counters(static_cast<size_t>(surogate::cuda::low_rank_products_counters(rows)));
        CUDA_CHECK(cudaMemset(counters.data(), 0, counters.bytes()));
        std::vector<DeviceBuffer<__nv_bfloat16>> b, out;
        std::vector<surogate::cuda::LowRankAdapter<__nv_bfloat16>> adapters;
        for (int i = 0; i < count; ++i) {
          b.emplace_back(static_cast<size_t>(group.widths[i] * kRank));
          out.emplace_back(static_cast<size_t>(rows * group.widths[i]));
          CUDA_CHECK(cudaMemset(b.back().data(), 0x3c, b.back().bytes()));
        }
        for (int i = 0; i < count; ++i) {
          adapters.push_back({a.data() + i * kRank * group.in, b[static_cast<size_t>(i)].data(), out[static_cast<size_t>(i)].data(),
                              kRank, group.widths[i]});
        }
        CUDA_CHECK(cudaMemset(x.data(), 0x3c, x.bytes()));
        CUDA_CHECK(cudaMemset(a.data(), 0x3c, a.bytes()));
        const surogate::cuda::LowRankShape shape{.rows = rows, .in = group.in, .scale = 2.0f};
        if (rows > surogate::cuda::kLowRankMaxRows) continue;  // the op runs cuBLASLt there
        const double fused = surogate::bench::time_graph(repeats, 1, [&](int, cudaStream_t stream) {
          surogate::cuda::low_rank_products(adapters.data(), count, x.data(), shape, partial.data(), counters.data(), stream);
        });
        const double chain = surogate::bench::time_graph(repeats, 1, [&](int, cudaStream_t stream) {
          matmul.run({.m = rows, .n = total, .k = group.in, .transpose_b = true}, u.data(), x.data(), a.data(), nullptr, stream);
          for (int i = 0; i < count; ++i) {
            matmul.run({.m = rows, .n = group.widths[i], .k = kRank, .transpose_b = true}, out[static_cast<size_t>(i)].data(),
                       u.data(), b[static_cast<size_t>(i)].data(), nullptr, stream, 2.0f);
          }
        });
        std::printf("%-11s %-8s %5lld %10.2f %10.2f %7.2fx\n", model.name, group.name, static_cast<long long>(rows), fused,
                    chain, chain / fused);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> rows_list = {512, 4096};
  int repeats = 200;
  if (!surogate::bench::parse_rows_and_repeats(argc, argv, "lora_products_bench", rows_list, repeats)) return 2;
  std::vector<std::unique_ptr<surogate::cuda::Matmul>> matmuls;
  for (int rank = 0; rank < kRanks; ++rank) matmuls.push_back(std::make_unique<surogate::cuda::Matmul>(size_t{32} << 20, rank));
  std::printf("%-11s %-20s %6s %6s %5s", "model", "product", "N", "K", "M");
  for (int rank = 0; rank < kRanks; ++rank) std::printf("  rank%d us", rank);
  std::printf(" %8s %7s\n", "best/r0", "GB/s");
  for (const Model& model : kModels) {
    for (const Product& product : model.products) {
      for (const int64_t rows : rows_list) {
        DeviceBuffer<__nv_bfloat16> x(static_cast<size_t>(rows * product.in)), w(static_cast<size_t>(product.out * product.in)),
            out(static_cast<size_t>(rows * product.out)), addend(static_cast<size_t>(product.addend ? rows * product.out : 1));
        CUDA_CHECK(cudaMemset(x.data(), 0x3c, x.bytes()));
        CUDA_CHECK(cudaMemset(w.data(), 0x3c, w.bytes()));
        CUDA_CHECK(cudaMemset(addend.data(), 0x3c, addend.bytes()));
        const surogate::cuda::MatmulShape shape{
            .m = rows, .n = product.out, .k = product.in, .transpose_b = true, .has_addend = product.addend};
        std::printf("%-11s %-20s %6lld %6lld %5lld", model.name, product.name, static_cast<long long>(product.out),
                    static_cast<long long>(product.in), static_cast<long long>(rows));
        double first = 0, best = 1e30;
        for (int rank = 0; rank < kRanks; ++rank) {
          const double us = surogate::bench::time_graph(repeats, 1, [&](int, cudaStream_t stream) {
            matmuls[static_cast<size_t>(rank)]->run(shape, out.data(), x.data(), w.data(), nullptr, stream, 1.0f,
                                                    product.addend ? addend.data() : nullptr);
          });
          if (rank == 0) first = us;
          best = std::min(best, us);
          std::printf(" %9.2f", us);
        }
        const double bytes = 2.0 * static_cast<double>(rows * product.in + product.out * product.in +
                                                       rows * product.out * (product.addend ? 2 : 1));
        std::printf(" %7.2fx %7.0f\n", first / best, bytes / best / 1e3);
      }
    }
  }
  time_groups(rows_list, repeats);
  CUDA_CHECK(cudaDeviceSynchronize());
  return 0;
}
