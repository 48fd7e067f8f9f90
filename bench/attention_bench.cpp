// Attention forward / backward TFLOP/s of the two CUDA paths the runtime chooses between
// (runtime/cuda_attention_path.h): cuDNN's fused SDPA (cuda/cudnn_attention.h) and our flash
// kernels (cuda/kernels/attention.h), at the LoRA jobs' shapes, called the way the binders call
// them. bench/attention_peers.py runs it beside PyTorch's SDPA backends (one JSON line a row).
//
//   attention_bench [--repeats 20] [--vision-only] [--short-documents-only] [--plans]
//
// Shapes: 2 × 2048 at 32/8 heads (Qwen3-8B job) and 16/8 (0.6B job), 8 × 2048 at 32/8, head_dim
// 128, bf16, causal. "rows": every batch row one sequence (what PyTorch's SDPA is given);
// "documents": the same tokens through document ids (one document per row), as the decoder graph
// passes them: cuDNN's ragged layout with 16 document slots a row (a run whose busiest row holds 16
// segments), our kernels' padded cu_seqlens. Each cuDNN row gives its workspace in MiB.
// FLOPs: forward 4 · B · Hq · S² · D / 2 (causal), backward 2.5× that. Mean of `repeats` calls after
// 5 warm-ups (CUDA events). Built beside the CUDA tests (tests/runtime_cuda/CMakeLists.txt).
//
// Short documents (--short-documents-only: those alone): the 8B and 0.6B job shapes over what the
// CLI benchmark's packed text gives, documents of 60 to 700 tokens one after another (a row's last
// cut at its end): our kernels and cuDNN's packed-documents layout with rows × the busiest row's
// segments as slots (what a training run sets, runtime/cuda_attention_path.h). FLOPs: forward
// 4 · Hq · Σ_documents length² / 2 · D (the work the documents' masks leave), backward 2.5× that.
//
// Every plan (--plans: those alone): each plan cuDNN offers (cudnn_attention_time_plans) for the
// rows layout at the 8B job's shape (2 × 2048) and at one 32,768-token row (the long-documents job),
// forward and backward, with its TFLOP/s: whether the heuristic's first plan, the one training
// runs, is the fastest.
//
// Vision rows (--vision-only: those alone): the Qwen2.5-VL-7B tower's bidirectional attention on one
// 980 × 1288 image (grid 70 × 92 = 6440 patches of 14 px; 16 heads, head_dim 80): "window" (the
// window blocks: windows of 112 px = 64 patches, smaller at the right and bottom edges, the real
// layout of vision/window_layout.h) and "full" (the full-attention blocks: the whole frame). Ours:
// the flash kernels at head_dim 128 on zero-padded operands, as the binder runs them (the padding
// copies not timed); cuDNN at head_dim 80: the documents layout with one slot per window, rows
// for the full frame. FLOPs: forward 4 · Hq · Σ_documents length² · 80 (no causal half; the
// useful head dim, not the padded one), backward 2.5× that.
#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cudnn_attention.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/attention.h"
#include "cuda/kernels/plain_attention.h"
#include "cuda_timing.h"
#include "vision/window_layout.h"

namespace {

using surogate::cuda::DeviceBuffer;
namespace cuda = surogate::cuda;

constexpr int kHeadDim = 128;
constexpr int64_t kSequence = 2048;

DeviceBuffer<__nv_bfloat16> random_bf16(size_t count, float scale) {
  std::mt19937 engine(1234);
  std::uniform_real_distribution<float> distribution(-scale, scale);
  std::vector<__nv_bfloat16> host(count);
  for (auto& value : host) value = __float2bfloat16(distribution(engine));
  return cuda::to_device(host);
}

struct Shape {
  const char* name;
  int64_t rows;
  int q_heads, kv_heads;
};

void print_row(const Shape& s, const char* backend, const char* layout, double forward_us, double backward_us,
               double forward_flops) {
  std::printf("{\"shape\": \"%s\", \"backend\": \"%s\", \"layout\": \"%s\", \"fwd_ms\": %.3f, \"bwd_ms\": %.3f, "
              "\"fwd_tflops\": %.1f, \"bwd_tflops\": %.1f}\n",
              s.name, backend, layout, forward_us / 1e3, backward_us / 1e3, forward_flops / forward_us / 1e6,
              2.5 * forward_flops / backward_us / 1e6);
}

// q, k, v, d_out (random) and out, logsumexp, dq, dk, dv of one shape.
struct Operands {
  DeviceBuffer<__nv_bfloat16> q, k, v, dout, out, dq, dk, dv;
  DeviceBuffer<float> lse;
  Operands(int64_t tokens, int q_heads, int kv_heads, int head_dim)
      : q(random_bf16(count(tokens, q_heads, head_dim), 2.0f)), k(random_bf16(count(tokens, kv_heads, head_dim), 2.0f)),
        v(random_bf16(count(tokens, kv_heads, head_dim), 1.0f)), dout(random_bf16(count(tokens, q_heads, head_dim), 1.0f)),
        out(count(tokens, q_heads, head_dim)), dq(count(tokens, q_heads, head_dim)),
        dk(count(tokens, kv_heads, head_dim)), dv(count(tokens, kv_heads, head_dim)),
        lse(static_cast<size_t>(tokens * q_heads)) {}
  static size_t count(int64_t tokens, int heads, int head_dim) { return static_cast<size_t>(tokens * heads * head_dim); }
};

// Our kernels' forward and backward means (µs), as the binder calls them.
std::pair<double, double> time_ours(Operands& o, const int32_t* cu_seqlens, const cuda::AttentionShape& shape,
                                    int repeats) {
  DeviceBuffer<float> workspace(static_cast<size_t>(cuda::attention_backward_workspace_floats(shape)));
  const double forward = surogate::bench::time_launches(repeats, 1, [&](int) {
    cuda::attention_forward(o.out.data(), o.lse.data(), o.q.data(), o.k.data(), o.v.data(), cu_seqlens, shape,
                            nullptr);
  });
  const double backward = surogate::bench::time_launches(repeats, 1, [&](int) {
    cuda::attention_backward(o.dq.data(), o.dk.data(), o.dv.data(), workspace.data(), o.dout.data(), o.q.data(),
                             o.k.data(), o.v.data(), o.out.data(), o.lse.data(), cu_seqlens, shape, nullptr);
  });
  return {forward, backward};
}

// cuDNN's forward and backward means (µs) of a prepared shape.
std::pair<double, double> time_cudnn(Operands& o, const int32_t* documents, const cuda::CudnnAttentionShape& shape,
                                     int repeats) {
  DeviceBuffer<std::byte> space(std::max(cuda::cudnn_attention_forward_workspace(shape),
                                         cuda::cudnn_attention_backward_workspace(shape)));
  const double forward = surogate::bench::time_launches(repeats, 1, [&](int) {
    cuda::cudnn_attention_forward(o.out.data(), o.lse.data(), o.q.data(), o.k.data(), o.v.data(), documents,
                                  space.data(), shape, nullptr);
  });
  const double backward = surogate::bench::time_launches(repeats, 1, [&](int) {
    cuda::cudnn_attention_backward(o.dq.data(), o.dk.data(), o.dv.data(), o.dout.data(), o.q.data(), o.k.data(),
                                   o.v.data(), o.out.data(), o.lse.data(), documents, space.data(), shape, nullptr);
  });
  return {forward, backward};
}

std::string fmt_gib(size_t bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), "workspace %.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

void print_refusal(const Shape& s, const char* backend, const char* layout, const std::string& error) {
  std::printf("{\"shape\": \"%s\", \"backend\": \"%s\", \"layout\": \"%s\", \"error\": \"%s\"}\n", s.name, backend,
              layout, error.c_str());
}

// Σ over the documents (runs of one id) of length².
double squared_lengths(const std::vector<int32_t>& documents) {
  double total = 0.0;
  for (size_t start = 0, t = 0; t <= documents.size(); ++t) {
    if (t == documents.size() || documents[t] != documents[start]) {
      total += double(t - start) * double(t - start);
      start = t;
    }
  }
  return total;
}

// Document ids of `rows` rows: documents of 60 to 700 tokens back to back, a new one at every row
// start; and the most documents a row holds (the slots bound a training run sets).
struct ShortDocuments {
  std::vector<int32_t> ids;
  int64_t busiest_row = 0;
};
ShortDocuments short_documents(int64_t rows) {
  std::mt19937 engine(2048);
  std::uniform_int_distribution<int64_t> length(60, 700);
  ShortDocuments documents;
  int32_t id = 0;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t in_row = 0;
    for (int64_t t = 0; t < kSequence; ++id, ++in_row) {
      const int64_t end = std::min(kSequence, t + length(engine));
      for (; t < end; ++t) documents.ids.push_back(id);
    }
    documents.busiest_row = std::max(documents.busiest_row, in_row);
  }
  return documents;
}

void short_document_rows(int repeats) {
  for (const Shape& s : {Shape{"2x2048, 32/8 (8B job), documents of 60-700", 2, 32, 8},
                         Shape{"2x2048, 16/8 (0.6B job), documents of 60-700", 2, 16, 8}}) {
    const int64_t tokens = s.rows * kSequence;
    const auto [ids, busiest] = short_documents(s.rows);
    const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    const double forward_flops = 4.0 * s.q_heads * squared_lengths(ids) / 2 * kHeadDim;
    Operands operands(tokens, s.q_heads, s.kv_heads, kHeadDim);
    auto documents = cuda::to_device(ids);
    DeviceBuffer<int32_t> cu(static_cast<size_t>(tokens + 1));
    cuda::cu_seqlens_from_documents(cu.data(), documents.data(), s.rows, kSequence, nullptr);
    const cuda::AttentionShape ours{tokens, s.q_heads, s.kv_heads, kHeadDim, static_cast<int>(tokens), 0, scale,
                                    static_cast<int>(kSequence)};
    const auto [our_forward, our_backward] = time_ours(operands, cu.data(), ours, repeats);
    print_row(s, "surogate", "documents", our_forward, our_backward, forward_flops);
    const cuda::CudnnAttentionShape shape{.batch = s.rows, .sequence = kSequence, .q_heads = s.q_heads,
                                          .kv_heads = s.kv_heads, .head_dim = kHeadDim, .scale = scale,
                                          .documents = true, .slots = s.rows * busiest};
    const std::string refusal = cuda::cudnn_attention_prepare(shape);
    if (!refusal.empty()) {
      print_refusal(s, "cudnn", "documents", refusal);
      continue;
    }
    const auto [forward, backward] = time_cudnn(operands, documents.data(), shape, repeats);
    print_row(s, "cudnn", "documents", forward, backward, forward_flops);
  }
}

void vision_rows(int repeats) {
  constexpr int kHeads = 16, kVisionDim = 80, kPadded = 128;
  const std::array<int64_t, 3> grid{1, 70, 92};
  const surogate::vision::VisionTowerIndices indices =
      surogate::vision::vision_tower_indices(std::span<const std::array<int64_t, 3>>(&grid, 1), 2, 112, 14);
  const int64_t tokens = grid[1] * grid[2];
  const float scale = 1.0f / std::sqrt(static_cast<float>(kVisionDim));
  for (const bool window : {true, false}) {
    const std::vector<int32_t>& ids = window ? indices.window_document_ids : indices.frame_document_ids;
    const Shape s{window ? "vision 6440 patches, 16 heads d80: window blocks"
                         : "vision 6440 patches, 16 heads d80: full blocks",
                  1, kHeads, kHeads};
    const double forward_flops = 4.0 * kHeads * squared_lengths(ids) * kVisionDim;
    auto documents = cuda::to_device(ids);
    DeviceBuffer<int32_t> cu(static_cast<size_t>(tokens + 1));
    cuda::cu_seqlens_from_documents(cu.data(), documents.data(), 1, tokens, nullptr);
    {  // ours: the binder's zero-padded heads (random values in every column: the time does not depend on them)
      Operands padded(tokens, kHeads, kHeads, kPadded);
      cuda::AttentionShape ours{tokens, kHeads, kHeads, kPadded, static_cast<int>(tokens), 0, scale,
                                static_cast<int>(tokens)};
      ours.causal = false;
      const auto [forward, backward] = time_ours(padded, cu.data(), ours, repeats);
      print_row(s, "surogate (padded to 128)", "documents", forward, backward, forward_flops);
    }
    Operands operands(tokens, kHeads, kHeads, kVisionDim);
    cuda::CudnnAttentionShape shape{.batch = 1, .sequence = tokens, .q_heads = kHeads, .kv_heads = kHeads,
                                    .head_dim = kVisionDim, .scale = scale, .documents = window,
                                    .slots = window ? int64_t{ids.back() - ids.front() + 1} : 0, .causal = false};
    const char* layout = window ? "documents (a slot per window)" : "rows";
    const std::string refusal = cuda::cudnn_attention_prepare(shape);
    if (!refusal.empty()) {
      print_refusal(s, "cudnn", layout, refusal);
      continue;
    }
    const auto [forward, backward] = time_cudnn(operands, documents.data(), shape, repeats);
    print_row(s, "cudnn", layout, forward, backward, forward_flops);
  }
}

// --plans: one JSON line a plan.
void plan_rows(int repeats) {
  struct PlanShape {
    const char* name;
    int64_t rows, sequence;
  };
  for (const PlanShape& s : {PlanShape{"2x2048, 32/8 (8B job)", 2, 2048}, PlanShape{"1x32768, 32/8 (8B, 32k documents)", 1, 32768}}) {
    const cuda::CudnnAttentionShape shape{.batch = s.rows,
                                          .sequence = s.sequence,
                                          .q_heads = 32,
                                          .kv_heads = 8,
                                          .head_dim = kHeadDim,
                                          .scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim))};
    const double forward_flops = double(s.rows) * 32 * (double(s.sequence) * s.sequence / 2) * kHeadDim * 4;
    for (const cuda::CudnnPlanTime& plan : cuda::cudnn_attention_time_plans(shape, repeats)) {
      const double flops = forward_flops * (plan.backward ? 2.5 : 1.0);
      std::printf("{\"shape\": \"%s\", \"direction\": \"%s\", \"plan\": %lld, \"name\": \"%s\", \"ms\": %.3f, "
                  "\"tflops\": %.0f, \"workspace_mib\": %.1f, \"failure\": \"%s\"}\n",
                  s.name, plan.backward ? "backward" : "forward", static_cast<long long>(plan.index), plan.name.c_str(),
                  plan.milliseconds, plan.failure.empty() ? flops / plan.milliseconds / 1e9 : 0.0,
                  plan.workspace / 1048576.0, plan.failure.c_str());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 20;
  bool vision_only = false, short_documents_only = false, plans_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) repeats = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--vision-only") == 0) vision_only = true;
    if (std::strcmp(argv[i], "--short-documents-only") == 0) short_documents_only = true;
    if (std::strcmp(argv[i], "--plans") == 0) plans_only = true;
  }
  const cuda::CudnnAvailability& cudnn = cuda::cudnn_availability();
  std::printf("{\"cudnn\": \"%s\", \"usable\": %s}\n", cudnn.description.c_str(), cudnn.usable ? "true" : "false");
  if (vision_only) {
    vision_rows(repeats);
    return 0;
  }
  if (plans_only) {
    plan_rows(repeats);
    return 0;
  }
  if (short_documents_only) {
    short_document_rows(repeats);
    return 0;
  }
  for (const Shape& s : {Shape{"2x2048, 32/8 (8B job)", 2, 32, 8}, Shape{"2x2048, 16/8 (0.6B job)", 2, 16, 8},
                         Shape{"8x2048, 32/8", 8, 32, 8}}) {
    const int64_t tokens = s.rows * kSequence;
    Operands operands(tokens, s.q_heads, s.kv_heads, kHeadDim);
    auto documents = cuda::to_device(std::vector<int32_t>(static_cast<size_t>(tokens), 0));
    DeviceBuffer<int32_t> cu(static_cast<size_t>(tokens + 1));
    cuda::cu_seqlens_from_documents(cu.data(), documents.data(), s.rows, kSequence, nullptr);
    const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    const double forward_flops = double(s.rows) * s.q_heads * (double(kSequence) * kSequence / 2) * kHeadDim * 4;

    // Ours, as the binder calls it (padded cu_seqlens, rows of 2048 for the backward's order).
    const cuda::AttentionShape ours{tokens, s.q_heads, s.kv_heads, kHeadDim, static_cast<int>(tokens), 0, scale,
                                    static_cast<int>(kSequence)};
    const auto [our_forward, our_backward] = time_ours(operands, cu.data(), ours, repeats);
    print_row(s, "surogate", "documents", our_forward, our_backward, forward_flops);

    for (const bool with_documents : {false, true}) {
      for (const bool deterministic : {false, true}) {
        cuda::CudnnAttentionShape shape{.batch = s.rows,
                                        .sequence = kSequence,
                                        .q_heads = s.q_heads,
                                        .kv_heads = s.kv_heads,
                                        .head_dim = kHeadDim,
                                        .scale = scale,
                                        .documents = with_documents,
                                        .slots = with_documents ? s.rows * 16 : 0,
                                        .deterministic = deterministic};
        const std::string refusal = cuda::cudnn_attention_prepare(shape);
        const char* backend = deterministic ? "cudnn deterministic" : "cudnn";
        const char* layout = with_documents ? "documents" : "rows";
        if (!refusal.empty()) {
          print_refusal(s, backend, layout, refusal);
          continue;
        }
        const size_t workspace = std::max(cuda::cudnn_attention_forward_workspace(shape),
                                          cuda::cudnn_attention_backward_workspace(shape));
        if (workspace > (size_t{8} << 30)) {  // the ragged layout's, at these sizes: more than a run could spare
          print_refusal(s, backend, layout, fmt_gib(workspace));
          continue;
        }
        const auto [forward, backward] = time_cudnn(operands, documents.data(), shape, repeats);
        print_row(s, backend, layout, forward, backward, forward_flops);
        std::printf("{\"shape\": \"%s\", \"backend\": \"%s\", \"layout\": \"%s\", \"fwd_workspace_mib\": %.2f, "
                    "\"bwd_workspace_mib\": %.2f}\n",
                    s.name, backend, layout, cuda::cudnn_attention_forward_workspace(shape) / 1048576.0,
                    cuda::cudnn_attention_backward_workspace(shape) / 1048576.0);
      }
    }
  }
  short_document_rows(repeats);
  vision_rows(repeats);  // after the decoder rows: bench/attention_peers.py reads those first
  return 0;
}
