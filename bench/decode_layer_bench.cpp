// One request's decode layers of Qwen3-8B run end to end as the decode graph runs them (the chain in
// decode_layer_chain.h), 36 layers with their own weights and caches captured in one CUDA graph and
// replayed, so that what one kernel leaves in flight reaches the next as in a real step
// (decode_kernels_bench.cpp times the kernels apart). Variants, each its own graph:
//   as the graph runs it;
//   other choices (rows a block of the GEMVs, splits, the q/k norm launched apart);
//   ablations — a launch left out (wrong values, the same bytes): what it costs in place, the
//               bound of folding it into another.
// Prints µs per layer and the steps/s of 36 layers + the LM head and the greedy choice.
//
//   decode_layer_bench [--rows 640,4096] [--repeats 5]   (--rows: the cached tokens)
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/greedy_tokens.h"
#include "cuda/kernels/small_m_linear.h"
#include "cuda_timing.h"
#include "decode_layer_chain.h"

namespace {

using namespace surogate::bench::decode_chain;
using surogate::bench::time_graph;

constexpr int kLayers = 36;

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> contexts = {640, 4096};
  int repeats = 5;
  if (!surogate::bench::parse_rows_and_repeats(argc, argv, "decode_layer_bench", contexts, repeats)) return 2;
  std::printf("decode_layer_bench: Qwen3-8B one request, %d layers in one replayed graph, µs per layer\n", kLayers);
  // The LM head and the greedy choice, as the step ends (two copies of the head: past the L2).
  std::vector<DeviceBuffer<Bf16>> heads;
  for (int i = 0; i < 2; ++i) heads.push_back(filled(kVocab * kHidden));
  DeviceBuffer<Bf16> x = filled(kHidden), logits = filled(kVocab);
  DeviceBuffer<int32_t> tokens(1);
  const double head = time_graph(8, 2, [&](int copy, cudaStream_t stream) {
    surogate::cuda::small_m_linear(logits.data(), x.data(), heads[static_cast<size_t>(copy)].data(),
                                   static_cast<const Bf16*>(nullptr), static_cast<const Bf16*>(nullptr),
                                   {.rows = 1, .out = kVocab, .in = kHidden}, stream);
    surogate::cuda::greedy_tokens(tokens.data(), logits.data(), 1, kVocab, stream);
  });
  std::printf("LM head + greedy_tokens %.2f us\n", head);
  heads.clear();
  const std::vector<Variant> variants = {
      {.name = "as the decode graph runs it"},
      {.name = "q/k norm + RoPE launched apart", .fold_qk_norm = false},
      {.name = "q/k/v 4 rows a block", .qkv_rows = 4},
      {.name = "o_proj 4 rows a block", .o_rows = 4},
      {.name = "down 4 rows a block", .down_rows = 4},
      {.name = "q/k/v, o_proj, down 4", .qkv_rows = 4, .o_rows = 4, .down_rows = 4},
      {.name = "gate/up 16 rows a block", .swiglu_rows = 16},
      {.name = "16 splits", .splits = 16},
      {.name = "no norms", .skip_norms = true},
      {.name = "no append", .skip_append = true, .fold_qk_norm = false},
      {.name = "no q/k norm+rope", .skip_rope = true},
      {.name = "no attention", .skip_attention = true},
      {.name = "the four products alone", .skip_norms = true, .skip_rope = true, .skip_attention = true}};
  for (const int64_t context : contexts) {
    Layers layers(context, kLayers);
    for (const Variant& variant : variants) {
      const double us = time_graph(kLayers * repeats, kLayers, [&](int copy, cudaStream_t stream) {
        layers.layer(copy, variant, stream);
      });
      std::printf("context %5lld %-30s %8.2f us a layer, %6.1f steps/s\n", static_cast<long long>(context),
                  variant.name.c_str(), us, 1e6 / (kLayers * us + head));
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  return 0;
}
