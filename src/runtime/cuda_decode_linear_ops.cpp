// CUDA binders of the decode step's fused products (ops/defs/decode_linear_def.cpp, and an unmerged
// adapter's low_rank_products at the end of the file) on BF16 and
// F16 graphs: linear_group (2 or 3 weights against one x: q, k and v) and linear_swiglu (gate and
// up read together, silu(gate) · up written), each ONE decode_gemv launch (cuda/kernels/decode_gemv.h)
// when x has one or two rows and the pointers allow its 16-byte loads (checked per call: a captured
// graph replays the same pointers); otherwise, at any row count, the unfused products on cuBLASLt
// (linear_swiglu's two products into the scratch, then cuda/kernels/swiglu.h), so the op is right
// wherever a graph puts it. The launch overlaps the previous kernel (PDL) when every weight is a
// parameter of the graph, which nothing before it in the step writes.
#include <algorithm>
#include <memory>
#include <vector>

#include "cuda/device_buffer.h"
#include "cuda/kernels/decode_gemv.h"
#include "cuda/kernels/low_rank_products.h"
#include "cuda/kernels/swiglu.h"
#include "cuda/matmul.h"
#include "runtime/cuda_bind_checks.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

// What both ops read from the node: the weights' widths, K, the rows of x, where each addend is.
struct FusedProducts {
  size_t weights = 0;
  std::vector<int64_t> widths;
  std::vector<size_t> addends;  // input index of weight i's addend, 0: none
  int64_t in = 0, rows = 0;
  bool parameters = true;  // every weight is a parameter (PDL allowed)

  explicit FusedProducts(const CudaBindContext& ctx) {
    weights = ctx.attrs.has("addends") ? ctx.attrs.integers("addends").size() : ctx.inputs.size() - 1;
    const std::vector<int64_t> flags = ctx.attrs.has("addends") ? ctx.attrs.integers("addends")
                                                                : std::vector<int64_t>(weights, 0);
    size_t next = 1 + weights;
    for (size_t i = 0; i < weights; ++i) {
      widths.push_back(ctx.inputs[1 + i].shape[0]);
      addends.push_back(flags[i] != 0 ? next++ : 0);
      parameters = parameters && ctx.input_parameter(1 + i);
    }
    in = ctx.inputs[1].shape[1];
    rows = ctx.inputs[0].numel() / in;
  }

  cuda::DecodeGemvShape gemv_shape(int rows_per_block) const {
    return {.rows = rows, .in = in, .rows_per_block = rows_per_block, .overlap_previous = parameters};
  }
  // Whether the decode GEMV takes this call (the row count and K at bind time; alignment per call).
  template <typename T>
  bool gemv_takes(const CudaKernelArgs& args, const cuda::DecodeGemvShape& shape) const {
    if (rows > cuda::kDecodeGemvMaxRows) return false;
    const void* pointers[cuda::kDecodeGemvMaxWeights] = {};
    for (size_t i = 0; i < weights; ++i) pointers[i] = args.inputs[1 + i].data;
    return cuda::decode_gemv_supported(shape, args.inputs[0].data, pointers, static_cast<int>(weights));
  }
  template <typename T>
  const T* addend(const CudaKernelArgs& args, size_t weight) const {
    return addends[weight] != 0 ? args.inputs[addends[weight]].as<const T>() : nullptr;
  }
  // The unfused product of weight i on cuBLASLt into `out` (its addend as C), as linear_add runs it.
  template <typename T>
  void matmul(CudaResources* resources, const CudaKernelArgs& args, size_t weight, void* out) const {
    const T* c = addend<T>(args, weight);
    const cuda::MatmulShape shape{.m = rows, .n = widths[weight], .k = in, .transpose_b = true, .has_addend = c != nullptr};
    resources->matmul().run(shape, out, args.inputs[0].as<const T>(), args.inputs[1 + weight].as<const T>(), nullptr,
                            args.stream, 1.0f, c);
  }
};

// Rows of W per block for a group (q, k and v): 8 at one row from 4096 weight rows (Qwen3-8B's
// 6,144; with o_proj and down_proj at 8 a decode layer 108.6 → 106.0 µs at 640 cached tokens
// against 4; bench/decode_layer_bench, 2026-11-30); otherwise the kernel's own rule. The first
// measurement of 8 gave wrong, nondeterministic tokens from the captured step on: the compiler had
// moved the kernel's non-coherent load of x above its programmatic wait, which decode_gemv.cu's
// __ldca now rules out (programmatic_launch.cuh; DecodeLayerChainCuda checks the captured chain).
int group_rows_per_block(int64_t rows, int64_t total) { return rows == 1 && total >= 4096 ? 8 : 0; }

template <typename T>
CudaKernel bind_linear_group_typed(const CudaBindContext& ctx) {
  ctx.expect_all(element_dtype<T>());
  const FusedProducts p(ctx);
  require(ctx, p.weights >= 2 && p.weights <= static_cast<size_t>(cuda::kDecodeGemvMaxWeights),
          "linear_group takes 2 or 3 weights, got {}", p.weights);
  int64_t total = 0;
  for (int64_t width : p.widths) total += width;
  const cuda::DecodeGemvShape shape = p.gemv_shape(group_rows_per_block(p.rows, total));
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    if (p.gemv_takes<T>(args, shape)) {
      cuda::DecodeGemvWeight<T> products[cuda::kDecodeGemvMaxWeights];
      for (size_t i = 0; i < p.weights; ++i) {
        products[i] = {.weight = args.inputs[1 + i].as<const T>(), .out = args.outputs[i].as<T>(), .rows = p.widths[i],
                       .addend = p.addend<T>(args, i)};
      }
      cuda::decode_gemv(products, static_cast<int>(p.weights), args.inputs[0].as<const T>(), shape, args.stream);
      return;
    }
    for (size_t i = 0; i < p.weights; ++i) p.matmul<T>(resources, args, i, args.outputs[i].data);
  };
}
CudaKernel bind_linear_group(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_linear_group_typed<T>(ctx); });
}

// Rows of W per block for the fused SwiGLU (gate and up rows together): 8 at one row on MLPs of
// 8192 weight rows and more, where bench/decode_kernels_bench measured it fastest on Qwen3-8B's
// MLP (2026-11-29, the fused layer chain); otherwise the kernel's own rule.
int swiglu_rows_per_block(int64_t rows, int64_t ffn) { return rows == 1 && 2 * ffn >= 8192 ? 8 : 0; }

template <typename T>
CudaKernel bind_linear_swiglu_typed(const CudaBindContext& ctx) {
  ctx.expect_all(element_dtype<T>());
  const FusedProducts p(ctx);
  require(ctx, p.weights == 2, "linear_swiglu takes two weights (gate, up), got {}", p.weights);
  const int64_t ffn = p.widths[0];
  const cuda::DecodeGemvShape shape = p.gemv_shape(swiglu_rows_per_block(p.rows, ffn));
  const bool with_addends = p.addends[0] != 0 || p.addends[1] != 0;
  // The fallback's two products, [rows, F] each.
  ScratchLayout scratch;
  const size_t products = scratch.take(sizeof(T) * static_cast<size_t>(2 * p.rows * ffn));
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    T* out = args.outputs[0].as<T>();
    // With an addend (a LoRA adapter's output) the products go through cuBLASLt: the fused
    // kernel's addend form gave wrong sums on the H200 (2026-11-29) and was taken out.
    if (!with_addends && p.gemv_takes<T>(args, shape)) {
      cuda::decode_gemv_swiglu(out, args.inputs[0].as<const T>(), args.inputs[1].as<const T>(),
                               args.inputs[2].as<const T>(), ffn, shape, args.stream);
      return;
    }
    T* gate = scratch_at<T>(resources, products);
    T* up = gate + p.rows * ffn;
    p.matmul<T>(resources, args, 0, gate);
    p.matmul<T>(resources, args, 1, up);
    cuda::swiglu_forward(out, gate, up, p.rows, ffn, ffn, args.stream);
  };
}
CudaKernel bind_linear_swiglu(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_linear_swiglu_typed<T>(ctx); });
}

// low_rank_products (ops/defs/low_rank_products_def.cpp): an unmerged adapter's two products in
// two launches (cuda/kernels/low_rank_products.h) where its shapes and the pointers allow, else
// x · A_iᵀ into the scratch and scale · (that) · B_iᵀ on cuBLASLt, as linear and linear{scale} run.
template <typename T>
CudaKernel bind_low_rank_products_typed(const CudaBindContext& ctx) {
  ctx.expect_all(element_dtype<T>());
  const size_t adapters = (ctx.inputs.size() - 1) / 2;
  require(ctx, adapters >= 1 && adapters <= static_cast<size_t>(cuda::kLowRankMaxAdapters),
          "low_rank_products takes 1 to {} adapters, got {}", cuda::kLowRankMaxAdapters, adapters);
  const int64_t in = ctx.inputs[1].shape[1], rows = ctx.inputs[0].numel() / in;
  std::vector<int64_t> ranks, widths;
  int64_t total = 0;
  for (size_t i = 0; i < adapters; ++i) {
    ranks.push_back(ctx.inputs[1 + i].shape[0]);
    widths.push_back(ctx.inputs[1 + adapters + i].shape[0]);
    total += ranks.back();
  }
  const bool kernel_shapes = cuda::low_rank_products_supported(rows, in, ranks.data(), widths.data(), static_cast<int>(adapters));
  const auto scale = static_cast<float>(ctx.attrs.number_or("scale", 1.0));
  // The kernels' partial sums, or the fallback's u [rows, r_i] per adapter, one after another.
  ScratchLayout scratch;
  const size_t hidden = scratch.take(std::max(cuda::low_rank_products_scratch_bytes(rows, total, in),
                                              sizeof(T) * static_cast<size_t>(rows * total)));
  ctx.resources.reserve_scratch(scratch.bytes);
  CudaResources* resources = &ctx.resources;
  // The kernels' row-tile counters: this node's own (zero between launches), a few bytes.
  auto counters = std::make_shared<cuda::DeviceBuffer<int>>(
      cuda::to_device(std::vector<int>(static_cast<size_t>(std::max<int64_t>(cuda::low_rank_products_counters(rows), 1)), 0)));
  return [=](const CudaKernelArgs& args) {
    T* u = scratch_at<T>(resources, hidden);  // the kernels' partial sums and u
    const T* x = args.inputs[0].as<const T>();
    cuda::LowRankAdapter<T> list[cuda::kLowRankMaxAdapters];
    for (size_t i = 0; i < adapters; ++i) {
      list[i] = {.a = args.inputs[1 + i].as<const T>(), .b = args.inputs[1 + adapters + i].as<const T>(),
                 .out = args.outputs[i].as<T>(), .rank = ranks[i], .width = widths[i]};
    }
    if (kernel_shapes && cuda::low_rank_products_aligned(list, static_cast<int>(adapters), x, u)) {
      cuda::low_rank_products(list, static_cast<int>(adapters), x, {.rows = rows, .in = in, .scale = scale}, u,
                              counters->data(), args.stream);
      return;
    }
    T* piece = u;
    for (size_t i = 0; i < adapters; ++i) {
      resources->matmul().run(cuda::MatmulShape{.m = rows, .n = ranks[i], .k = in, .transpose_b = true}, piece, x,
                              list[i].a, nullptr, args.stream);
      resources->matmul().run(cuda::MatmulShape{.m = rows, .n = widths[i], .k = ranks[i], .transpose_b = true},
                              list[i].out, piece, list[i].b, nullptr, args.stream, scale);
      piece += rows * ranks[i];
    }
  };
}
CudaKernel bind_low_rank_products(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_low_rank_products_typed<T>(ctx); });
}

}  // namespace

void register_decode_linear_cuda_ops(CudaOpTable& table) {
  table.add("linear_group", bind_linear_group);
  table.add("linear_swiglu", bind_linear_swiglu);
  table.add("low_rank_products", bind_low_rank_products);
}

}  // namespace surogate::runtime
