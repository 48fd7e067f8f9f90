// The CUDA backend's kernel table: op name -> CUDA binder. A binder runs once per plan step at
// load time, with the node, its concrete types and attrs, and returns a closure that only
// launches kernels on the given stream (no allocation, no host synchronisation). The table is
// filled by explicit functions, one per op family (register_core_cuda_ops, ...), like the op
// registry; the CUDA backend refuses a plan containing an op the table lacks, at load time.
// Closure contract = the CPU one (graph/op_registry.h): write every element of every output
// (except outputs nothing reads, see CudaBindContext::outputs_read), never read outputs (accumulate excepted), inputs and outputs never alias.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cuda/device_buffer.h"
#include "cuda/fp8_matmul.h"
#include "cuda/matmul.h"
#include "graph/op_registry.h"

namespace surogate::runtime {

// A tensor as a CUDA kernel closure sees it at run time: a device pointer with dtype and dims.
struct CudaTensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  const int64_t* dims = nullptr;
  int rank = 0;
  int64_t count = 0;

  template <typename T>
  T* as() const { return static_cast<T*>(data); }
  int64_t numel() const { return count; }
  int64_t dim(int index) const { return dims[index < 0 ? index + rank : index]; }
};

struct CudaKernelArgs {
  std::span<const CudaTensorView> inputs;
  std::span<const CudaTensorView> outputs;
  cudaStream_t stream = nullptr;
};

using CudaKernel = std::function<void(const CudaKernelArgs&)>;

// What the bound steps of one plan share, owned by the backend: the cuBLASLt handle (one
// stream, so one Matmul) and one scratch buffer. Steps run one after another on that stream, so
// a step's temporaries (fp32 weight-gradient accumulators, attention workspaces, logits chunks)
// can all live in the same buffer: binders ask for bytes at load time (`reserve_scratch`), the
// backend allocates the largest request once after binding, and closures read `scratch()` when
// they run.
class CudaResources {
public:
  cuda::Matmul& matmul() { return matmul_; }
  // The FP8 products' own cuBLASLt handle and workspace, made by the first binder that asks
  // (fp8_hybrid plans only).
  cuda::Fp8Matmul& fp8_matmul() {
    if (!fp8_matmul_) fp8_matmul_ = std::make_unique<cuda::Fp8Matmul>();
    return *fp8_matmul_;
  }
  void reserve_scratch(size_t bytes) { scratch_request_ = std::max(scratch_request_, bytes); }
  size_t scratch_request() const { return scratch_request_; }
  void allocate_scratch() {
    borrowed_scratch_ = nullptr;
    scratch_ = cuda::DeviceBuffer<std::byte>(scratch_request_);
  }
  // Instead of allocate_scratch: the steps' temporaries in `bytes` (≥ the request) of another
  // backend's scratch, which must outlive this one and never run at the same time (CudaBackend::
  // share_activation_memory_with).
  void borrow_scratch(std::byte* scratch, size_t bytes) {
    scratch_ = {};
    borrowed_scratch_ = scratch;
    borrowed_scratch_bytes_ = bytes;
  }
  std::byte* scratch() const {
    return borrowed_scratch_ != nullptr ? borrowed_scratch_ : const_cast<std::byte*>(scratch_.data());
  }
  // The scratch's capacity, its own or borrowed; owned_scratch_bytes: only what it allocated.
  size_t scratch_bytes() const { return borrowed_scratch_ != nullptr ? borrowed_scratch_bytes_ : scratch_.bytes(); }
  size_t owned_scratch_bytes() const { return scratch_.bytes(); }

  // fp8_hybrid: whether the host knows that scaling-state row `site` has a delayed amax
  // (row[0] > 0, read back after the last roll; train/device/fp8_delayed_sites.h). Its producers
  // then skip the amax scratch and the pending pass (cuda/kernels/fp8_quantize.h). False for
  // every site until told (always correct, one launch slower). Kernels consult it when they
  // launch, so a change must drop a captured CUDA graph (CudaBackend::set_fp8_delayed_sites).
  bool fp8_delayed(int64_t site) const {
    return site >= 0 && static_cast<size_t>(site) < fp8_delayed_.size() && fp8_delayed_[static_cast<size_t>(site)];
  }
  // Whether anything changed.
  bool set_fp8_delayed(std::vector<bool> sites) {
    if (sites == fp8_delayed_) return false;
    fp8_delayed_ = std::move(sites);
    return true;
  }

private:
  std::vector<bool> fp8_delayed_;
  cuda::Matmul matmul_;
  std::unique_ptr<cuda::Fp8Matmul> fp8_matmul_;
  size_t scratch_request_ = 0;
  cuda::DeviceBuffer<std::byte> scratch_;
  std::byte* borrowed_scratch_ = nullptr;
  size_t borrowed_scratch_bytes_ = 0;
};

// Carves one step's temporaries out of the shared scratch (256-byte aligned pieces): a binder
// take()s its pieces at bind time, reserves layout.bytes, and its kernel finds them with
// scratch_at once the backend has allocated the scratch.
struct ScratchLayout {
  size_t bytes = 0;
  size_t take(size_t size) {
    size_t offset = bytes;
    bytes = (offset + size + 255) / 256 * 256;
    return offset;
  }
};

template <typename T>
T* scratch_at(CudaResources* resources, size_t offset) {
  return reinterpret_cast<T*>(resources->scratch() + offset);
}

// What a CUDA binder sees at load time: types carry dtype and shape, no data.
struct CudaBindContext {
  const graph::Node& node;
  std::span<const graph::TensorType> inputs;
  std::span<const graph::TensorType> outputs;
  graph::Attrs attrs;
  CudaResources& resources;  // outlives every closure bound with it
  // Per output: whether anything reads it (a later step, a graph output, a parameter gradient).
  // A binder may skip the work of an output nobody reads (the frozen LM head's weight gradient in
  // LoRA plans) and leave it unwritten; empty means every output is read.
  std::vector<bool> outputs_read = {};
  // Per input: whether it is a parameter of the graph (no forward step writes it, only an optimizer
  // step after the backward; a dequantized weight is an activation, a KV cache a constant that its
  // op writes). Empty: none is.
  std::vector<bool> inputs_parameter = {};

  bool output_read(size_t index) const { return outputs_read.empty() || outputs_read[index]; }
  bool input_parameter(size_t index) const { return index < inputs_parameter.size() && inputs_parameter[index]; }

  // UserError naming the node unless every input and output is `dtype`.
  void expect_all(DType dtype) const;
};

using CudaBinder = std::function<CudaKernel(const CudaBindContext&)>;

class CudaOpTable {
public:
  // Registering a name twice is a bug (InternalError).
  void add(std::string name, CudaBinder binder);
  const CudaBinder* find(std::string_view name) const;
  std::vector<std::string> names() const;

private:
  std::map<std::string, CudaBinder, std::less<>> binders_;
};

// add, mul, scale, scale_by, fill, sum, broadcast, accumulate (F32; add, scale, scale_by, fill,
// accumulate also BF16), in
// runtime/cuda_core_ops.cpp.
void register_core_cuda_ops(CudaOpTable& table);

// The decoder's model ops and their backward ops on bf16 tensors (runtime/cuda_model_ops.cpp).
void register_model_cuda_ops(CudaOpTable& table);

// attention, attention_fp8, attention_backward: cuDNN's fused SDPA or our kernels
// (runtime/cuda_attention_path.h), in runtime/cuda_attention_ops.cpp.
void register_attention_cuda_ops(CudaOpTable& table);

// lm_head_loss (and its rewritten forms, compiler/loss_input_grad.h: lm_head_loss_with_input_grad
// for a frozen head, lm_head_loss_with_grads for a trainable one), lm_head_loss_backward,
// lm_head_accuracy (chunked LM head + cross-entropy on bf16 / fp16), sequence_logps(_backward) and
// preference_loss(_backward) (preference tuning), in runtime/cuda_loss_ops.cpp.
void register_loss_cuda_ops(CudaOpTable& table);

// linear, linear_add and their backward ops, bias_gradient (cuBLASLt, bf16), in
// runtime/cuda_linear_ops.cpp.
void register_linear_cuda_ops(CudaOpTable& table);

// dropout (BF16 / F32; the LoRA rewrite's adapter-input dropout), concat and split (any dtype; its
// batched low-rank products), in runtime/cuda_lora_ops.cpp.
void register_lora_cuda_ops(CudaOpTable& table);

// fused_rmsnorm_rope(_backward) (Qwen3's q/k norm + RoPE on bf16), in runtime/cuda_fused_ops.cpp.
void register_fused_cuda_ops(CudaOpTable& table);

// dequantize_nf4, dequantize_fp8_blocks (QLoRA's NF4 / FP8 base weights to bf16), in
// runtime/cuda_quant_ops.cpp.
void register_quant_cuda_ops(CudaOpTable& table);

// quantize_fp8, linear_fp8, linear_fp8_backward_input (the fp8_hybrid recipe), in
// runtime/cuda_fp8_ops.cpp.
void register_fp8_cuda_ops(CudaOpTable& table);

// router_topk, moe_dispatch, moe_permute, moe_unpermute, router_statistics, router_aux_loss,
// sigmoid_gated_add, expert_linear and their backward ops (mixture of experts; grouped GEMMs), in
// runtime/cuda_moe_ops.cpp.
void register_moe_cuda_ops(CudaOpTable& table);

// gelu, layernorm and their backward ops (bf16 / fp16), in runtime/cuda_gelu_layernorm_ops.cpp.
void register_gelu_layernorm_cuda_ops(CudaOpTable& table);

// cached_attention (generation: attention over a KV cache whose k_cache / v_cache inputs it writes in
// place; BF16 / F16 / F32), in runtime/cuda_generation_ops.cpp.
void register_generation_cuda_ops(CudaOpTable& table);

// linear_group and linear_swiglu (a decode step's fused products, ops/defs/decode_linear_def.cpp:
// one decode_gemv launch at one or two rows, cuBLASLt otherwise) and low_rank_products (an
// unmerged adapter's two products, ops/defs/low_rank_products_def.cpp), in
// runtime/cuda_decode_linear_ops.cpp.
void register_decode_linear_cuda_ops(CudaOpTable& table);

// gather_rows and gather_rows_sum (prompt sharing's moves between a micro-batch's two layouts,
// ops/defs/gather_rows_def.cpp), in runtime/cuda_gather_rows_ops.cpp.
void register_gather_rows_cuda_ops(CudaOpTable& table);

// The table the engine uses: every family registered above, built once on first use.
const CudaOpTable& builtin_cuda_ops();

}  // namespace surogate::runtime
