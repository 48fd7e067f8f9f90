// Causal GQA attention through cuDNN's fused SDPA (the cuDNN frontend's graph API), forward and
// backward, with the same mask as the CPU op (ops/attention.h) and our kernels (kernels/attention.h):
// key j is visible from query i iff j ≤ i, both are in one document, and (window > 0) i − j < window.
// With causal = false (a vision tower's attention; no window) iff both are in one document.
//
// Layouts: q, out, dq [tokens, q_heads, head_dim]; k, v, dk, dv [tokens, kv_heads, head_dim]
// (tokens = batch · sequence, row-major, bf16 or fp16). Two ways of telling cuDNN the documents:
//  * documents == false: every batch row is one sequence (cuDNN's b = batch, s = sequence, no
//    padding). logsumexp is [batch, q_heads, sequence] (cuDNN's packed Stats, the CPU op's layout).
//  * documents == true: the per-token document ids [batch, sequence] (−1 for padding) become
//    cuDNN's ragged layout: b = `slots` segments (documents and padding runs; a new one at every
//    row start and id change), their lengths and element offsets computed on the device
//    (kernels/attention_ragged.h), empty slots past the last. The graph cannot depend on the
//    batch's data (CUDA graphs replay it), so `slots` is a bound the caller knows from its data
//    (runtime/cuda_attention_path.h: rows × the most segments a row of the run's data has); a
//    batch with more segments gives NaN outputs, never wrong numbers. cuDNN runs each padding run
//    as one segment; a fix-up after it gives padding tokens the CPU op's meaning (each
//    sees only itself). logsumexp is [tokens, q_heads] (ragged Stats). At most 65535 slots.
// The logsumexp (natural log of the scaled scores' sum of exponentials) is private to this path:
// its forward and backward agree on the layout; the flash kernels use another ([q_heads, tokens]).
//
// Graphs are built once per shape (every field of CudnnAttentionShape) and cached for the process,
// with one cuDNN handle per device; building happens at bind time, never under stream capture.
// Compiled in when the cuDNN frontend headers and libcudnn were found (SUROGATE_WITH_CUDNN);
// otherwise every shape is refused and the callers run the kernels of kernels/attention.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

namespace surogate::cuda {

struct CudnnAttentionShape {
  int64_t batch = 0;
  int64_t sequence = 0;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int window = 0;             // 0 = unlimited
  float scale = 0.0f;         // softmax scale (> 0)
  bool documents = false;     // packed documents (the ragged layout above)
  int64_t slots = 0;          // documents: segment slots per call (> 0)
  bool half = false;          // fp16; false: bf16
  bool deterministic = false; // backward: cuDNN's deterministic algorithm (bitwise repeatable dQ)
  bool causal = true;         // false: bidirectional within each sequence / document

  int64_t tokens() const { return batch * sequence; }
  int64_t cudnn_batch() const { return documents ? slots : batch; }  // cuDNN's b
};

// The cuDNN library in use ("cuDNN 9.19.0"), or why there is none: not compiled in, the library
// refuses the device, … Asked once; says nothing about a given shape.
struct CudnnAvailability {
  bool usable = false;
  std::string description;
  size_t version = 0;  // cudnnGetVersion(): 91900 for 9.19.0; 0 without cuDNN
};
const CudnnAvailability& cudnn_availability();

// Builds (once; cached) the forward and backward graphs of `shape` on the current device. Empty
// when both are supported, else cuDNN's (or our) reason for refusing it.
std::string cudnn_attention_prepare(const CudnnAttentionShape& shape);

// Device bytes a prepared shape's forward / backward needs for its workspace (cuDNN's own plus
// the documents layout's lengths, offsets and overflow flag). 256-byte aligned.
size_t cudnn_attention_forward_workspace(const CudnnAttentionShape& shape);
size_t cudnn_attention_backward_workspace(const CudnnAttentionShape& shape);

// `document_ids` [batch, sequence] only read when shape.documents. `workspace` holds the bytes above. Enqueued on
// `stream`, no host synchronisation (capturable).
void cudnn_attention_forward(void* out, float* logsumexp, const void* q, const void* k, const void* v,
                             const int32_t* document_ids, void* workspace, const CudnnAttentionShape& shape,
                             cudaStream_t stream);
void cudnn_attention_backward(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                              const void* v, const void* out, const float* logsumexp, const int32_t* document_ids,
                              void* workspace, const CudnnAttentionShape& shape, cudaStream_t stream);

// Measurement (bench/attention_bench.cpp --plans): every plan cuDNN offers for a rows-layout shape
// (heuristic modes A, B and its fallback list), forward then backward, each run once and then
// `repeats` times back to back on fresh device buffers of constant values. Training runs the
// first forward and first backward plan (mode A's choice). Empty without cuDNN.
struct CudnnPlanTime {
  bool backward = false;
  int64_t index = 0;
  std::string name;        // cuDNN's engine and knobs, e.g. "eng6_k24=26"
  double milliseconds = 0;  // mean of the repeats
  int64_t workspace = 0;    // bytes
  std::string failure;      // non-empty: the plan did not run
};
std::vector<CudnnPlanTime> cudnn_attention_time_plans(const CudnnAttentionShape& shape, int repeats);

}  // namespace surogate::cuda
