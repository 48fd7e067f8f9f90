// Measures on the GPU machine what the docs and benchmarks quote: the bf16 matmul ceiling
// through cuBLASLt (8192³, the MFU denominator), device-to-device copy bandwidth, and the
// speed of the attention and memory-bound kernels at training shapes. Inputs are random
// (never zeros); each figure is the median of 20 timed runs after 5 warm-ups, timed with
// CUDA events. Prints a table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include <cuda_bf16.h>

#include "cuda/device_buffer.h"
#include "cuda/kernels/attention.h"
#include "cuda/kernels/cross_entropy.h"
#include "cuda/kernels/low_rank_backward.h"
#include "cuda/kernels/qk_norm_rope.h"
#include "cuda/kernels/rmsnorm.h"
#include "cuda/kernels/swiglu.h"
#include "cuda/matmul.h"

namespace {

using surogate::cuda::DeviceBuffer;
using surogate::cuda::Event;

double median_ms(const std::function<void()>& work) {
  for (int i = 0; i < 5; ++i) work();
  std::vector<float> times;
  Event start, stop;
  for (int i = 0; i < 20; ++i) {
    start.record(nullptr);
    work();
    stop.record(nullptr);
    stop.synchronize();
    times.push_back(stop.elapsed_ms_since(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

DeviceBuffer<__nv_bfloat16> random_bf16(size_t count, float scale) {
  std::mt19937 engine(1234);
  std::uniform_real_distribution<float> distribution(-scale, scale);
  std::vector<__nv_bfloat16> host(count);
  for (auto& value : host) value = __float2bfloat16(distribution(engine));
  return surogate::cuda::to_device(host);
}

// `amount` is flops or bytes; printed per second in units of 10^12 (TFLOP/s or TB/s).
void row(const char* what, double ms, const char* unit, double amount) {
  std::printf("| %-58s | %9.3f ms | %8.1f %s |\n", what, ms, amount / (ms * 1e-3) / 1e12, unit);
}

}  // namespace

int main() {
  using namespace surogate::cuda;
  cudaDeviceProp props{};
  CUDA_CHECK(cudaGetDeviceProperties(&props, 0));
  std::printf("GPU: %s, %d SMs\n\n| measurement | median | rate |\n| --- | --- | --- |\n", props.name,
              props.multiProcessorCount);

  {  // bf16 matmul ceiling, 8192³, fp32 accumulate, bf16 out.
    const int64_t n = 8192;
    auto a = random_bf16(n * n, 1.0f), b = random_bf16(n * n, 1.0f);
    DeviceBuffer<__nv_bfloat16> c(n * n);
    Matmul matmul;
    MatmulShape shape{.m = n, .n = n, .k = n, .transpose_b = true};
    const double ms = median_ms([&] { matmul.run(shape, c.data(), a.data(), b.data(), nullptr, nullptr); });
    row("cuBLASLt bf16 8192^3 (x.W^T)", ms, "TFLOP/s", 2.0 * n * n * n);
    MatmulShape nn{.m = n, .n = n, .k = n};
    const double ms_nn = median_ms([&] { matmul.run(nn, c.data(), a.data(), b.data(), nullptr, nullptr); });
    row("cuBLASLt bf16 8192^3 (dy.W)", ms_nn, "TFLOP/s", 2.0 * n * n * n);
  }
  {  // The 8B LoRA job's products at 4096 tokens: base projections and the rank-16 adapter GEMMs
     // (memory-bound: their rate is printed as the bytes of the big operand per second).
    const int64_t tokens = 4096, hidden = 4096, rank = 16;
    Matmul matmul;
    auto x = random_bf16(tokens * 12288, 1.0f), w = random_bf16(12288 * hidden, 1.0f),
         dy = random_bf16(tokens * 12288, 1.0f), down = random_bf16(tokens * rank, 1.0f),
         lora_a = random_bf16(rank * 12288, 1.0f), lora_b = random_bf16(12288 * rank, 1.0f);
    DeviceBuffer<__nv_bfloat16> y(tokens * 12288), small(tokens * rank);
    DeviceBuffer<float> grad(12288 * rank);
    for (int64_t out : {int64_t{1024}, hidden, int64_t{12288}}) {
      char label[96];
      MatmulShape forward{.m = tokens, .n = out, .k = hidden, .transpose_b = true};
      std::snprintf(label, sizeof label, "linear fwd %ldx%ld -> %ld", long(tokens), long(hidden), long(out));
      row(label, median_ms([&] { matmul.run(forward, y.data(), x.data(), w.data(), nullptr, nullptr); }), "TFLOP/s",
          2.0 * tokens * hidden * out);
      MatmulShape input_grad{.m = tokens, .n = hidden, .k = out};
      std::snprintf(label, sizeof label, "linear dx %ldx%ld <- %ld", long(tokens), long(hidden), long(out));
      row(label, median_ms([&] { matmul.run(input_grad, y.data(), dy.data(), w.data(), nullptr, nullptr); }),
          "TFLOP/s", 2.0 * tokens * hidden * out);
      MatmulShape lora_up{.m = tokens, .n = out, .k = rank, .transpose_b = true};
      std::snprintf(label, sizeof label, "lora B fwd %ldx%ld -> %ld (out bytes)", long(tokens), long(rank), long(out));
      row(label, median_ms([&] { matmul.run(lora_up, y.data(), down.data(), lora_b.data(), nullptr, nullptr); }),
          "TB/s   ", 2.0 * tokens * out);
      MatmulShape d_down{.m = tokens, .n = rank, .k = out};
      std::snprintf(label, sizeof label, "lora d_down %ldx%ld -> %ld (dy bytes)", long(tokens), long(out), long(rank));
      row(label, median_ms([&] { matmul.run(d_down, small.data(), dy.data(), lora_b.data(), nullptr, nullptr); }),
          "TB/s   ", 2.0 * tokens * out);
      MatmulShape grad_b{.m = out, .n = rank, .k = tokens, .transpose_a = true, .output = MatmulOutput::Float32,
                         .accumulate = true};
      std::snprintf(label, sizeof label, "lora dB %ldx%ld (dy bytes)", long(out), long(rank));
      row(label, median_ms([&] { matmul.run(grad_b, grad.data(), dy.data(), down.data(), nullptr, nullptr); }),
          "TB/s   ", 2.0 * tokens * out);
    }
    MatmulShape lora_down{.m = tokens, .n = rank, .k = hidden, .transpose_b = true};
    row("lora A fwd 4096x4096 -> 16 (x bytes)",
        median_ms([&] { matmul.run(lora_down, small.data(), x.data(), lora_a.data(), nullptr, nullptr); }), "TB/s   ",
        2.0 * tokens * hidden);
    MatmulShape grad_a{.m = rank, .n = hidden, .k = tokens, .transpose_a = true, .output = MatmulOutput::Float32,
                       .accumulate = true};
    row("lora dA 16x4096 (x bytes)",
        median_ms([&] { matmul.run(grad_a, grad.data(), down.data(), x.data(), nullptr, nullptr); }), "TB/s   ",
        2.0 * tokens * hidden);
  }
  {  // The 8B job's base products (with the adapter output / earlier gradient as addend) under
     // cuBLASLt's first 6 ranked algorithms: is the heuristic's first choice the fastest?
    const int64_t tokens = 4096, hidden = 4096;
    auto x = random_bf16(tokens * 12288, 1.0f), w = random_bf16(12288 * hidden, 1.0f),
         addend = random_bf16(tokens * 12288, 1.0f);
    DeviceBuffer<__nv_bfloat16> y(tokens * 12288);
    struct Case {
      const char* label;
      MatmulShape shape;
    };
    const Case cases[] = {
        {"base fwd x[4096,4096]·Wᵀ+c -> 1024", {.m = tokens, .n = 1024, .k = hidden, .transpose_b = true, .has_addend = true}},
        {"base fwd x[4096,4096]·Wᵀ+c -> 4096", {.m = tokens, .n = 4096, .k = hidden, .transpose_b = true, .has_addend = true}},
        {"base fwd x[4096,4096]·Wᵀ+c -> 12288", {.m = tokens, .n = 12288, .k = hidden, .transpose_b = true, .has_addend = true}},
        {"base fwd x[4096,12288]·Wᵀ+c -> 4096", {.m = tokens, .n = 4096, .k = 12288, .transpose_b = true, .has_addend = true}},
        {"base dx dy[4096,1024]·W -> 4096", {.m = tokens, .n = hidden, .k = 1024}},
        {"base dx dy[4096,1024]·W+c -> 4096", {.m = tokens, .n = hidden, .k = 1024, .has_addend = true}},
        {"base dx dy[4096,12288]·W+c -> 4096", {.m = tokens, .n = hidden, .k = 12288, .has_addend = true}},
        {"base dx dy[4096,4096]·W -> 12288", {.m = tokens, .n = 12288, .k = 4096}},
    };
    for (const Case& c : cases) {
      for (int heuristic = 0; heuristic < 6; ++heuristic) {
        Matmul matmul(size_t{32} << 20, heuristic);
        char label[96];
        std::snprintf(label, sizeof label, "%s, algorithm %d", c.label, heuristic);
        row(label, median_ms([&] {
              matmul.run(c.shape, y.data(), x.data(), w.data(), nullptr, nullptr, 1.0f,
                         c.shape.has_addend ? addend.data() : nullptr);
            }),
            "TFLOP/s", 2.0 * c.shape.m * c.shape.n * c.shape.k);
      }
    }
  }
  {  // The adapter GEMMs of the 8B job under each of cuBLASLt's first 8 ranked algorithms (one
     // Matmul per rank; rank 0 is what the engine uses). Rate: bytes of the big operands per second.
    const int64_t tokens = 4096, rank = 16;
    auto big = random_bf16(tokens * 12288, 1.0f), big2 = random_bf16(tokens * 12288, 1.0f),
         small = random_bf16(tokens * 3 * rank, 1.0f), adapter = random_bf16(12288 * rank, 1.0f);
    DeviceBuffer<__nv_bfloat16> out(tokens * 12288), grad(12288 * rank);
    struct Case {
      const char* label;
      MatmulShape shape;
      const __nv_bfloat16* a;
      const __nv_bfloat16* b;
      void* out;
      const void* addend;
      double bytes;
    };
    const Case cases[] = {
        {"A fwd x[4096,4096]·Aᵀ", {.m = tokens, .n = rank, .k = 4096, .transpose_b = true}, big.data(), adapter.data(),
         small.data(), nullptr, 2.0 * tokens * 4096},
        {"B fwd +y [4096,16]·Bᵀ -> 4096", {.m = tokens, .n = 4096, .k = rank, .transpose_b = true, .has_addend = true},
         small.data(), adapter.data(), out.data(), big2.data(), 4.0 * tokens * 4096},
        {"d_down dy[4096,12288]·B", {.m = tokens, .n = rank, .k = 12288}, big.data(), adapter.data(), small.data(),
         nullptr, 2.0 * tokens * 12288},
        {"dB += dyᵀ[12288]·u", {.m = 12288, .n = rank, .k = tokens, .transpose_a = true, .accumulate = true},
         big.data(), small.data(), grad.data(), nullptr, 2.0 * tokens * 12288},
        {"dA += duᵀ·x[4096]", {.m = rank, .n = 4096, .k = tokens, .transpose_a = true, .accumulate = true},
         small.data(), big.data(), grad.data(), nullptr, 2.0 * tokens * 4096},
        {"dx = du·A + c [4096]", {.m = tokens, .n = 4096, .k = rank, .has_addend = true}, small.data(),
         adapter.data(), out.data(), big2.data(), 4.0 * tokens * 4096},
        // The same with q/k/v batched (LoraOptions::batch_shared_inputs): rank 3·16 = 48.
        {"A fwd x[4096,4096]·A_catᵀ (48)", {.m = tokens, .n = 3 * rank, .k = 4096, .transpose_b = true}, big.data(),
         adapter.data(), small.data(), nullptr, 2.0 * tokens * 4096},
        {"dA_cat += du_catᵀ·x[4096] (48)", {.m = 3 * rank, .n = 4096, .k = tokens, .transpose_a = true,
         .accumulate = true}, small.data(), big.data(), grad.data(), nullptr, 2.0 * tokens * 4096},
        {"dx = du_cat·A_cat + c [4096] (48)", {.m = tokens, .n = 4096, .k = 3 * rank, .has_addend = true},
         small.data(), adapter.data(), out.data(), big2.data(), 4.0 * tokens * 4096},
    };
    for (const Case& c : cases) {
      for (int heuristic = 0; heuristic < 8; ++heuristic) {
        Matmul matmul(size_t{32} << 20, heuristic);
        char label[96];
        std::snprintf(label, sizeof label, "%s, algorithm %d", c.label, heuristic);
        row(label, median_ms([&] { matmul.run(c.shape, c.out, c.a, c.b, nullptr, nullptr, 1.0f, c.addend); }),
            "TB/s   ", c.bytes);
      }
    }
  }
  {  // device-to-device copy, 2 GiB, counting read + write.
    const size_t bytes = size_t{2} << 30;
    DeviceBuffer<std::byte> source(bytes), target(bytes);
    CUDA_CHECK(cudaMemset(source.data(), 0x3c, bytes));
    const double ms = median_ms([&] {
      CUDA_CHECK(cudaMemcpyAsync(target.data(), source.data(), bytes, cudaMemcpyDeviceToDevice, nullptr));
    });
    row("copy 2 GiB device-to-device (read+write)", ms, "TB/s   ", 2.0 * bytes);
  }
  // Attention: the benchmark jobs' shapes (micro-batch 2 × 2048 packed as 2 documents; Qwen3-8B
  // 32/8 heads, Qwen3-0.6B 16/8, head_dim 128) and 8 documents × 2048 at 32/8 heads.
  // "padded": cu_seqlens as the runtime passes it (tokens + 1 entries, documents = tokens).
  struct AttentionCase {
    const char* name;
    int documents, q_heads, kv_heads;
    bool padded;
  };
  for (const AttentionCase& c :
       {AttentionCase{"8x2048, 32/8 heads", 8, 32, 8, false}, AttentionCase{"2x2048, 32/8 (8B job)", 2, 32, 8, false},
        AttentionCase{"2x2048, 32/8 (8B job) padded", 2, 32, 8, true},
        AttentionCase{"2x2048, 16/8 (0.6B job)", 2, 16, 8, false}}) {
    const int64_t tokens = int64_t{c.documents} * 2048;
    AttentionShape shape{.tokens = tokens, .q_heads = c.q_heads, .kv_heads = c.kv_heads, .head_dim = 128,
                         .documents = c.padded ? static_cast<int>(tokens) : c.documents, .window = 0,
                         .softmax_scale = 0.0883883f};
    std::vector<int32_t> cu;
    for (int d = 0; d <= c.documents; ++d) cu.push_back(d * 2048);
    if (c.padded) cu.resize(tokens + 1, static_cast<int32_t>(tokens));
    auto cu_device = to_device(cu);
    const int64_t q_count = tokens * c.q_heads * 128, kv_count = tokens * c.kv_heads * 128;
    auto q = random_bf16(q_count, 2.0f), k = random_bf16(kv_count, 2.0f), v = random_bf16(kv_count, 1.0f),
         dout = random_bf16(q_count, 1.0f);
    DeviceBuffer<__nv_bfloat16> out(q_count), dq(q_count), dk(kv_count), dv(kv_count);
    DeviceBuffer<float> lse(tokens * c.q_heads),
        workspace(attention_backward_workspace_floats(shape, AttentionBackwardBlocks::PerQueryHead));
    // Causal: half of the 2048² score matrix per document and head; 4 flops per score·dim (QKᵀ, PV).
    const double forward_flops = double(c.documents) * c.q_heads * (2048.0 * 2048.0 / 2) * 128 * 4;
    char label[128];
    for (int blocks_per_sm : {2, 3}) {
      const double ms = median_ms([&] {
        attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), cu_device.data(), shape, nullptr,
                          blocks_per_sm);
      });
      std::snprintf(label, sizeof label, "attention fwd %s, %d blocks/SM", c.name, blocks_per_sm);
      row(label, ms, "TFLOP/s", forward_flops);
    }
    // Rows of 2048 tokens (the job's micro-batch rows: every row's heavy key blocks first).
    shape.sequence = 2048;
    for (int variant = 0; variant < 3; ++variant) {
      const int warps = variant == 1 ? 8 : 4;
      const AttentionBackwardBlocks blocks =
          variant == 2 ? AttentionBackwardBlocks::PerQueryHead : AttentionBackwardBlocks::WholeGroup;
      const double ms_backward = median_ms([&] {
        attention_backward(dq.data(), dk.data(), dv.data(), workspace.data(), dout.data(), q.data(), k.data(),
                           v.data(), out.data(), lse.data(), cu_device.data(), shape, nullptr, warps, blocks);
      });
      std::snprintf(label, sizeof label, "attention bwd %s, %d warps, %s (2.5x fwd flops)", c.name, warps,
                    variant == 2 ? "per q head" : "whole group");
      row(label, ms_backward, "TFLOP/s", 2.5 * forward_flops);
    }
  }
  {  // memory-bound kernels at 16384 tokens x 4096 channels.
    const int64_t rows = 16384, channels = 4096;
    auto x = random_bf16(rows * channels, 2.0f), w = random_bf16(channels, 1.0f), dy = random_bf16(rows * channels, 1.0f);
    DeviceBuffer<__nv_bfloat16> y(rows * channels);
    DeviceBuffer<float> rstd(rows), dweight(channels), scratch(rmsnorm_backward_scratch_floats(rows, channels));
    const double bytes = 2.0 * rows * channels * 2;
    row("rmsnorm fwd 16384x4096 (read+write)",
        median_ms([&] { rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), rows, channels, 1e-6f, nullptr); }),
        "TB/s   ", bytes);
    row("rmsnorm bwd 16384x4096 (3 tensors)", median_ms([&] {
          rmsnorm_backward(y.data(), dweight.data(), scratch.data(), dy.data(), nullptr, x.data(), w.data(), rstd.data(),
                           rows, channels, nullptr);
        }),
        "TB/s   ", 1.5 * bytes);
    row("rmsnorm bwd 16384x4096, frozen weight (no dw)", median_ms([&] {
          rmsnorm_backward(y.data(), nullptr, nullptr, dy.data(), nullptr, x.data(), w.data(), rstd.data(), rows,
                           channels, nullptr);
        }),
        "TB/s   ", 1.5 * bytes);
    // Rows wider than 8,192 channels take the kernel that spills registers (docs/cuda.md,
    // "Register spills"): the same bytes at 8,192 (no spill) and 16,384 channels.
    for (const int64_t wide : {int64_t{8192}, int64_t{16384}}) {
      const int64_t wide_rows = rows * channels / wide;
      char label[96];
      std::snprintf(label, sizeof label, "rmsnorm bwd %lldx%lld (3 tensors)", static_cast<long long>(wide_rows),
                    static_cast<long long>(wide));
      DeviceBuffer<float> wide_rstd(wide_rows), wide_dweight(wide),
          wide_scratch(rmsnorm_backward_scratch_floats(wide_rows, wide));
      auto wide_w = random_bf16(wide, 1.0f);
      rmsnorm_forward(y.data(), wide_rstd.data(), x.data(), wide_w.data(), wide_rows, wide, 1e-6f, nullptr);
      row(label, median_ms([&] {
            rmsnorm_backward(y.data(), wide_dweight.data(), wide_scratch.data(), dy.data(), nullptr, x.data(),
                             wide_w.data(), wide_rstd.data(), wide_rows, wide, nullptr);
          }),
          "TB/s   ", 1.5 * bytes);
    }
    auto gate_up = random_bf16(rows * 2 * 14336 / 4, 2.0f);
    DeviceBuffer<__nv_bfloat16> act(rows / 4 * 14336);
    row("swiglu fwd 4096x14336 (fused gate_up)", median_ms([&] {
          swiglu_forward(act.data(), gate_up.data(), gate_up.data() + 14336, rows / 4, 14336, 2 * 14336, nullptr);
        }),
        "TB/s   ", 3.0 * rows / 4 * 14336 * 2);
  }
  {  // Qwen3 q norm + rope over 16384 tokens x 32 heads x 128.
    QkNormRopeShape shape{.tokens = 16384, .heads = 32, .head_dim = 128};
    const int64_t count = shape.tokens * shape.heads * shape.head_dim;
    auto x = random_bf16(count, 2.0f), w = random_bf16(128, 1.0f);
    std::vector<float> inv_freq(64);
    for (int i = 0; i < 64; ++i) inv_freq[i] = 1.0f / static_cast<float>(std::pow(1e6, i / 64.0));
    std::vector<int32_t> positions(shape.tokens);
    for (int64_t t = 0; t < shape.tokens; ++t) positions[t] = static_cast<int32_t>(t % 2048);
    auto device_inv_freq = to_device(inv_freq);
    auto device_positions = to_device(positions);
    DeviceBuffer<__nv_bfloat16> y(count);
    DeviceBuffer<float> rstd(shape.tokens * shape.heads);
    row("qk-norm + rope fwd 16384x32x128 (read+write)", median_ms([&] {
          qk_norm_rope_forward(y.data(), rstd.data(), x.data(), w.data(), device_inv_freq.data(),
                               device_positions.data(), shape, nullptr);
        }),
        "TB/s   ", 2.0 * count * 2);
  }
  {  // fused cross-entropy on a 1024 x 151936 logits chunk (in place), read twice + written once.
    const int64_t rows = 1024, vocab = 151936;
    auto logits = random_bf16(rows * vocab, 4.0f);
    std::vector<int32_t> labels(rows);
    for (int64_t i = 0; i < rows; ++i) labels[i] = static_cast<int32_t>((i * 7919) % vocab);
    auto device_labels = to_device(labels);
    DeviceBuffer<float> losses(rows), scale(1);
    DeviceBuffer<int32_t> count(1);
    cross_entropy_gradient_scale(count.data(), scale.data(), device_labels.data(), rows, vocab, nullptr);
    row("cross-entropy fwd+bwd 1024x151936 (r+w)", median_ms([&] {
          cross_entropy_forward_backward(logits.data(), losses.data(), device_labels.data(), rows, vocab, scale.data(),
                                         nullptr);
        }),
        "TB/s   ", 2.0 * rows * vocab * 2);
  }
  // The fused low-rank backward (LoRA's B product) at the 8B job's shapes (a micro-batch of 4,096
  // tokens, and one 32,768-token row), with the launcher's tiling and with every other (column
  // tiles x token tiles x stages). Rate: dy bytes per second.
  for (const int64_t tokens : {int64_t{4096}, int64_t{32768}}) {
    auto dy = random_bf16(tokens * 12288, 1.0f), x = random_bf16(tokens * 16, 1.0f), w = random_bf16(12288 * 16, 1.0f);
    DeviceBuffer<__nv_bfloat16> dx(tokens * 16), dw(12288 * 16);
    for (int64_t columns : {int64_t{1024}, int64_t{4096}, int64_t{12288}}) {
      std::vector<LowRankTiling> tilings{{}};
      for (int column_tiles : {1, 2, 4})
        for (int token_tiles : {1, 2, 4})
          for (int stages : {2, 3, 4}) tilings.push_back({column_tiles, token_tiles, stages});
      for (const LowRankTiling& tiling : tilings) {
        const LowRankBackwardShape shape{.tokens = tokens, .columns = columns, .rank = 16, .scale = 2.0f,
                                         .accumulate = true, .tiling = tiling};
        DeviceBuffer<float> workspace(low_rank_backward_workspace_floats(shape));
        char label[96];
        std::snprintf(label, sizeof label, "low-rank bwd dy[%ld,%ld] r16, tiling %d/%d/%d%s", long(tokens), long(columns),
                      tiling.column_tiles, tiling.token_tiles, tiling.stages, tiling.column_tiles ? "" : " (auto)");
        row(label, median_ms([&] {
              low_rank_backward(dx.data(), dw.data(), workspace.data(), dy.data(), x.data(), w.data(), shape, nullptr);
            }),
            "TB/s   ", 2.0 * tokens * columns);
      }
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  return 0;
}
