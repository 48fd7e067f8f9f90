// cuDNN's fused SDPA behind cuda/cudnn_attention.h: graph construction, the per-shape cache, the
// per-device handle, execution. Without SUROGATE_WITH_CUDNN every shape is refused.
#include "cuda/cudnn_attention.h"

#include <fmt/format.h>

#include "cuda/cuda_check.h"
#include "cuda/device_attributes.h"
#include "cuda/device_buffer.h"

#if defined(SUROGATE_WITH_CUDNN)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "cuda/kernels/attention_ragged.h"

namespace surogate::cuda {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

// The tensors' uids in both graphs (the variant pack maps them to pointers).
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV,
  kSeqLenQ, kSeqLenKv, kOffsetQ, kOffsetK, kOffsetV, kOffsetO, kOffsetStats,
};

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The ragged description's pieces at the front of the workspace (documents layout only).
struct RaggedPieces {
  size_t lengths = 0, q = 0, kv = 0, stats = 0, overflow = 0, bytes = 0;
};
RaggedPieces ragged_pieces(const CudnnAttentionShape& shape) {
  if (!shape.documents) return {};
  const size_t slots = static_cast<size_t>(shape.slots);
  RaggedPieces p;
  p.lengths = 0;
  p.q = aligned(sizeof(int32_t) * slots);
  p.kv = p.q + aligned(sizeof(int32_t) * (slots + 1));
  p.stats = p.kv + aligned(sizeof(int32_t) * (slots + 1));
  p.overflow = p.stats + aligned(sizeof(int32_t) * (slots + 1));
  p.bytes = p.overflow + aligned(sizeof(int32_t));
  return p;
}

struct Graphs {
  std::shared_ptr<fe::graph::Graph> forward, backward;
  int64_t forward_workspace = 0, backward_workspace = 0;
  std::string refusal;  // empty: both built
};

// The cache's key: the device (a handle and its plans belong to one) and every field of the shape.
using CacheKey = std::tuple<int, int64_t, int64_t, int, int, int, int, float, bool, int64_t, bool, bool, bool>;
CacheKey cache_key(int device, const CudnnAttentionShape& s) {
  return {device, s.batch, s.sequence, s.q_heads, s.kv_heads, s.head_dim, s.window, s.scale, s.documents,
          s.documents ? s.slots : 0, s.half, s.deterministic, s.causal};
}

std::mutex& cache_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::map<CacheKey, Graphs>& graph_cache() {
  static std::map<CacheKey, Graphs> cache;
  return cache;
}

// One handle per device, made on first use (never under capture: binders prepare shapes first).
cudnnHandle_t handle_for(int device) {
  static std::unordered_map<int, cudnnHandle_t> handles;  // guarded by cache_mutex
  auto found = handles.find(device);
  if (found != handles.end()) return found->second;
  cudnnHandle_t handle = nullptr;
  const cudnnStatus_t status = cudnnCreate(&handle);
  if (status != CUDNN_STATUS_SUCCESS) {
    throw CudaError(fmt::format("cudnnCreate: {}", cudnnGetErrorString(status)));
  }
  handles.emplace(device, handle);
  return handle;
}

// dims [b, h, s, d] of one of q / k / v / o and their gradients: token-major rows of h · d.
TensorPtr io_tensor(fe::graph::Graph& graph, const char* name, int64_t uid, const CudnnAttentionShape& shape,
                    int heads) {
  const int64_t b = shape.cudnn_batch(), s = shape.sequence, d = shape.head_dim;
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({b, heads, s, d})
                          .set_stride({s * heads * d, d, heads * d, 1}));
}

void describe_io(const TensorPtr& tensor, const char* name, int64_t uid, const CudnnAttentionShape& shape, int heads,
                 const TensorPtr& offsets) {
  const int64_t b = shape.cudnn_batch(), s = shape.sequence, d = shape.head_dim;
  tensor->set_output(true).set_name(name).set_uid(uid).set_dim({b, heads, s, d}).set_stride(
      {s * heads * d, d, heads * d, 1});
  if (offsets) tensor->set_ragged_offset(offsets);
}

// Stats [b, h, s, 1]: packed BHSD rows per batch row, or ragged [tokens, h] per document.
void describe_stats(const TensorPtr& stats, const CudnnAttentionShape& shape, const TensorPtr& offsets) {
  const int64_t h = shape.q_heads, s = shape.sequence;
  stats->set_uid(kStats).set_name("stats").set_data_type(fe::DataType_t::FLOAT);
  if (shape.documents) {
    stats->set_dim({shape.slots, h, s, 1}).set_stride({s * h, 1, h, 1}).set_ragged_offset(offsets);
  } else {
    stats->set_dim({shape.batch, h, s, 1}).set_stride({h * s, s, 1, 1});
  }
}

TensorPtr index_tensor(fe::graph::Graph& graph, const char* name, int64_t uid, int64_t count) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({count, 1, 1, 1})
                          .set_stride({1, 1, 1, 1})
                          .set_data_type(fe::DataType_t::INT32));
}

// The documents layout's lengths and offsets, fresh tensors of `graph`.
struct RaggedTensors {
  TensorPtr seq_q, seq_kv, q, k, v, o, stats;
};
RaggedTensors ragged_tensors(fe::graph::Graph& graph, const CudnnAttentionShape& shape) {
  if (!shape.documents) return {};
  const int64_t slots = shape.slots;
  return {index_tensor(graph, "seq_len_q", kSeqLenQ, slots), index_tensor(graph, "seq_len_kv", kSeqLenKv, slots),
          index_tensor(graph, "offset_q", kOffsetQ, slots + 1),  index_tensor(graph, "offset_k", kOffsetK, slots + 1),
          index_tensor(graph, "offset_v", kOffsetV, slots + 1),  index_tensor(graph, "offset_o", kOffsetO, slots + 1),
          index_tensor(graph, "offset_stats", kOffsetStats, slots + 1)};
}

std::shared_ptr<fe::graph::Graph> new_graph(const CudnnAttentionShape& shape) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(shape.half ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

// The mask both directions share: causal from each sequence's (document's) first token, the
// window as cuDNN's left bound (key j visible iff i − j < window), per-document lengths. Not
// causal: no diagonal band, only the lengths (bidirectional within each sequence / document).
template <typename Attributes>
void set_mask(Attributes& options, const CudnnAttentionShape& shape, const RaggedTensors& ragged) {
  options.set_attn_scale(shape.scale);
  if (shape.causal) {
    options.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
  }
  if (shape.window > 0) options.set_diagonal_band_left_bound(shape.window);
  if (shape.documents) {
    options.set_padding_mask(true)
        .set_seq_len_q(ragged.seq_q)
        .set_seq_len_kv(ragged.seq_kv)
        .set_max_total_seq_len_q(shape.tokens())
        .set_max_total_seq_len_kv(shape.tokens());
  }
}

// validate → operation graph → heuristics' plans → support → build; the first failure's message.
// Training builds the heuristic's first plan (mode A); `every_plan` (the measurement below) builds
// every plan of modes A, B and the fallback list.
std::string finish(fe::graph::Graph& graph, cudnnHandle_t handle, int64_t& workspace, bool every_plan = false) {
  auto step = [](fe::error_t status, const char* what) -> std::string {
    return status.is_good() ? std::string() : fmt::format("{}: {}", what, status.get_message());
  };
  std::string failure = step(graph.validate(), "validate");
  if (failure.empty()) failure = step(graph.build_operation_graph(handle), "build_operation_graph");
  if (failure.empty()) {
    failure = every_plan ? step(graph.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::B, fe::HeurMode_t::FALLBACK}),
                                "create_execution_plans")
                         : step(graph.create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
  }
  if (failure.empty()) failure = step(graph.check_support(), "check_support");
  if (failure.empty()) {
    failure = every_plan ? step(graph.build_plans(fe::BuildPlanPolicy_t::ALL), "build_plans")
                         : step(graph.build_plans(), "build_plans");
  }
  if (failure.empty()) failure = step(graph.get_workspace_size(workspace), "get_workspace_size");
  return failure;
}

Graphs build(const CudnnAttentionShape& shape, cudnnHandle_t handle, bool every_plan = false) {
  Graphs graphs;
  graphs.forward = new_graph(shape);
  {
    fe::graph::Graph& g = *graphs.forward;
    const RaggedTensors ragged = ragged_tensors(g, shape);
    TensorPtr q = io_tensor(g, "q", kQ, shape, shape.q_heads), k = io_tensor(g, "k", kK, shape, shape.kv_heads),
              v = io_tensor(g, "v", kV, shape, shape.kv_heads);
    if (shape.documents) {
      q->set_ragged_offset(ragged.q);
      k->set_ragged_offset(ragged.k);
      v->set_ragged_offset(ragged.v);
    }
    auto options = fe::graph::SDPA_attributes().set_name("attention").set_generate_stats(true);
    set_mask(options, shape, ragged);
    auto [o, stats] = g.sdpa(q, k, v, options);
    describe_io(o, "o", kO, shape, shape.q_heads, ragged.o);
    stats->set_output(true);
    describe_stats(stats, shape, ragged.stats);
    graphs.refusal = finish(g, handle, graphs.forward_workspace, every_plan);
  }
  if (!graphs.refusal.empty()) {
    graphs.refusal = "forward " + graphs.refusal;
    return graphs;
  }
  graphs.backward = new_graph(shape);
  fe::graph::Graph& g = *graphs.backward;
  const RaggedTensors ragged = ragged_tensors(g, shape);
  TensorPtr q = io_tensor(g, "q", kQ, shape, shape.q_heads), k = io_tensor(g, "k", kK, shape, shape.kv_heads),
            v = io_tensor(g, "v", kV, shape, shape.kv_heads), o = io_tensor(g, "o", kO, shape, shape.q_heads),
            d_o = io_tensor(g, "d_o", kDO, shape, shape.q_heads);
  TensorPtr stats = g.tensor(fe::graph::Tensor_attributes());
  describe_stats(stats, shape, ragged.stats);
  if (shape.documents) {
    q->set_ragged_offset(ragged.q);
    k->set_ragged_offset(ragged.k);
    v->set_ragged_offset(ragged.v);
    o->set_ragged_offset(ragged.o);
    d_o->set_ragged_offset(ragged.o);
  }
  auto options = fe::graph::SDPA_backward_attributes().set_name("attention_backward");
  options.set_deterministic_algorithm(shape.deterministic);
  set_mask(options, shape, ragged);
  auto [dq, dk, dv] = g.sdpa_backward(q, k, v, o, d_o, stats, options);
  describe_io(dq, "d_q", kDQ, shape, shape.q_heads, ragged.q);
  describe_io(dk, "d_k", kDK, shape, shape.kv_heads, ragged.k);
  describe_io(dv, "d_v", kDV, shape, shape.kv_heads, ragged.v);
  graphs.refusal = finish(g, handle, graphs.backward_workspace, every_plan);
  if (!graphs.refusal.empty()) graphs.refusal = "backward " + graphs.refusal;
  return graphs;
}

// Our own limits before asking cuDNN: 16-bit only (the callers'), head dims a multiple of 8 up to
// 256, int32 ragged offsets.
std::string precheck(const CudnnAttentionShape& shape) {
  if (shape.head_dim % 8 != 0 || shape.head_dim > 256) return fmt::format("head_dim {}", shape.head_dim);
  if (!shape.causal && shape.window > 0) return "a window needs causal attention";
  if (shape.q_heads <= 0 || shape.kv_heads <= 0 || shape.q_heads % shape.kv_heads != 0) return "heads";
  const int64_t elements = shape.tokens() * shape.q_heads * shape.head_dim;
  if (shape.documents && elements >= (int64_t{1} << 31)) return "more than 2^31 elements with packed documents";
  // The documents layout's batch is its slots: kept within a grid dimension's 65535 blocks whichever
  // axis cuDNN puts the batch on.
  if (shape.documents && (shape.slots <= 0 || shape.slots > 65535)) {
    return fmt::format("{} document slots with packed documents (1 to 65535)", shape.slots);
  }
  // cuDNN 9.14.0's backward at head_dim 256 over packed documents gave gradients off by order 1 on
  // an H200 (2026-11-30, test_cudnn_attention_cuda.cpp's d 256 documents case: dq 0.96, dk 1.0 of
  // the largest value), where 9.19.0 is right; our kernels run it before 9.19.
  if (shape.documents && shape.head_dim > 128 && cudnnGetVersion() < 91900) {
    return "head_dim above 128 over packed documents before cuDNN 9.19 (9.14's backward measured wrong)";
  }
  return {};
}

const Graphs& prepared(const CudnnAttentionShape& shape) {
  const int device = current_device();
  std::lock_guard<std::mutex> lock(cache_mutex());
  auto& cache = graph_cache();
  auto found = cache.find(cache_key(device, shape));
  if (found != cache.end()) return found->second;
  Graphs graphs;
  graphs.refusal = precheck(shape);
  if (graphs.refusal.empty()) {
    try {
      graphs = build(shape, handle_for(device));
    } catch (const std::exception& error) {  // the frontend throws on some refusals
      graphs = Graphs{};
      graphs.refusal = error.what();
    }
  }
  return cache.emplace(cache_key(device, shape), std::move(graphs)).first->second;
}

const Graphs& ready(const CudnnAttentionShape& shape) {
  const Graphs& graphs = prepared(shape);
  if (!graphs.refusal.empty()) CUDA_REQUIRE(false, "cuDNN attention: a shape cuDNN refused was run");
  return graphs;
}

void execute(const fe::graph::Graph& graph, std::unordered_map<int64_t, void*>& pack, void* workspace,
             cudaStream_t stream) {
  cudnnHandle_t handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    handle = handle_for(current_device());
  }
  const cudnnStatus_t status = cudnnSetStream(handle, stream);
  if (status != CUDNN_STATUS_SUCCESS) throw CudaError(fmt::format("cudnnSetStream: {}", cudnnGetErrorString(status)));
  fe::error_t result = graph.execute(handle, pack, workspace);
  if (!result.is_good()) throw CudaError(fmt::format("cuDNN attention execute: {}", result.get_message()));
}

// Fills the documents layout's lengths, offsets and overflow flag at the workspace's front; adds
// them to `pack` and returns cuDNN's own workspace (after them).
void* with_ragged(std::unordered_map<int64_t, void*>& pack, const int32_t* document_ids, void* workspace,
                  const CudnnAttentionShape& shape, cudaStream_t stream) {
  auto* base = static_cast<std::byte*>(workspace);
  if (!shape.documents) return base;
  const RaggedPieces p = ragged_pieces(shape);
  auto* lengths = reinterpret_cast<int32_t*>(base + p.lengths);
  auto* q = reinterpret_cast<int32_t*>(base + p.q);
  auto* kv = reinterpret_cast<int32_t*>(base + p.kv);
  auto* stats = reinterpret_cast<int32_t*>(base + p.stats);
  ragged_segments_from_documents(lengths, q, kv, stats, reinterpret_cast<int32_t*>(base + p.overflow), document_ids,
                                 shape.batch, shape.sequence, shape.slots, shape.q_heads * shape.head_dim,
                                 shape.kv_heads * shape.head_dim, shape.q_heads, stream);
  pack[kSeqLenQ] = lengths;
  pack[kSeqLenKv] = lengths;
  pack[kOffsetQ] = q;
  pack[kOffsetO] = q;
  pack[kOffsetK] = kv;
  pack[kOffsetV] = kv;
  pack[kOffsetStats] = stats;
  return base + p.bytes;
}

const int32_t* overflow_flag(void* workspace, const CudnnAttentionShape& shape) {
  return reinterpret_cast<const int32_t*>(static_cast<std::byte*>(workspace) + ragged_pieces(shape).overflow);
}

RaggedPaddingShape padding_shape(const CudnnAttentionShape& shape) {
  return {shape.tokens(), shape.q_heads, shape.kv_heads, shape.head_dim, shape.scale};
}

}  // namespace

const CudnnAvailability& cudnn_availability() {
  static const CudnnAvailability availability = [] {
    CudnnAvailability a;
    const size_t version = cudnnGetVersion();
    a.version = version;
    const std::string name = fmt::format("cuDNN {}.{}.{}", version / 10000, version / 100 % 100, version % 100);
    if (version < 90000) {
      a.description = name + " is older than 9.0";
      return a;
    }
    cudaDeviceProp properties{};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&properties, device) != cudaSuccess) {
      (void)cudaGetLastError();  // not left for a later launch check to find
      a.description = "no CUDA device";
      return a;
    }
    if (properties.major < 8) {
      a.description = fmt::format("{} has no fused attention for compute capability {}.{} (sm_80 and newer)", name,
                                  properties.major, properties.minor);
      return a;
    }
    a.usable = true;
    a.description = name;
    return a;
  }();
  return availability;
}

std::string cudnn_attention_prepare(const CudnnAttentionShape& shape) {
  const CudnnAvailability& availability = cudnn_availability();
  if (!availability.usable) return availability.description;
  return prepared(shape).refusal;
}

size_t cudnn_attention_forward_workspace(const CudnnAttentionShape& shape) {
  return ragged_pieces(shape).bytes + aligned(static_cast<size_t>(ready(shape).forward_workspace));
}

size_t cudnn_attention_backward_workspace(const CudnnAttentionShape& shape) {
  return ragged_pieces(shape).bytes + aligned(static_cast<size_t>(ready(shape).backward_workspace));
}

void cudnn_attention_forward(void* out, float* logsumexp, const void* q, const void* k, const void* v,
                             const int32_t* document_ids, void* workspace, const CudnnAttentionShape& shape,
                             cudaStream_t stream) {
  const Graphs& graphs = ready(shape);
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<void*>(q)}, {kK, const_cast<void*>(k)},
                                              {kV, const_cast<void*>(v)}, {kO, out}, {kStats, logsumexp}};
  void* own = with_ragged(pack, document_ids, workspace, shape, stream);
  execute(*graphs.forward, pack, own, stream);
  if (!shape.documents) return;
  const int32_t* overflow = overflow_flag(workspace, shape);
  if (shape.half) {
    ragged_padding_forward(static_cast<__half*>(out), logsumexp, static_cast<const __half*>(q),
                           static_cast<const __half*>(k), static_cast<const __half*>(v), document_ids, overflow,
                           padding_shape(shape), stream);
  } else {
    ragged_padding_forward(static_cast<__nv_bfloat16*>(out), logsumexp, static_cast<const __nv_bfloat16*>(q),
                           static_cast<const __nv_bfloat16*>(k), static_cast<const __nv_bfloat16*>(v), document_ids,
                           overflow, padding_shape(shape), stream);
  }
}

void cudnn_attention_backward(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                              const void* v, const void* out, const float* logsumexp, const int32_t* document_ids,
                              void* workspace, const CudnnAttentionShape& shape, cudaStream_t stream) {
  const Graphs& graphs = ready(shape);
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<void*>(q)},     {kK, const_cast<void*>(k)},          {kV, const_cast<void*>(v)},
      {kO, const_cast<void*>(out)},   {kDO, const_cast<void*>(dout)},      {kStats, const_cast<float*>(logsumexp)},
      {kDQ, dq},                      {kDK, dk},                           {kDV, dv}};
  void* own = with_ragged(pack, document_ids, workspace, shape, stream);
  execute(*graphs.backward, pack, own, stream);
  if (!shape.documents) return;
  const int32_t* overflow = overflow_flag(workspace, shape);
  if (shape.half) {
    ragged_padding_backward(static_cast<__half*>(dq), static_cast<__half*>(dk), static_cast<__half*>(dv),
                            static_cast<const __half*>(dout), document_ids, overflow, padding_shape(shape), stream);
  } else {
    ragged_padding_backward(static_cast<__nv_bfloat16*>(dq), static_cast<__nv_bfloat16*>(dk),
                            static_cast<__nv_bfloat16*>(dv), static_cast<const __nv_bfloat16*>(dout), document_ids,
                            overflow, padding_shape(shape), stream);
  }
}

std::vector<CudnnPlanTime> cudnn_attention_time_plans(const CudnnAttentionShape& shape, int repeats) {
  CUDA_REQUIRE(!shape.documents, "cudnn_attention_time_plans: the rows layout only");
  if (!cudnn_availability().usable) return {};
  cudnnHandle_t handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    handle = handle_for(current_device());
  }
  const Graphs graphs = build(shape, handle, true);
  CUDA_REQUIRE(graphs.refusal.empty(), "cudnn_attention_time_plans: cuDNN refused the shape");
  const size_t q_bytes = static_cast<size_t>(shape.tokens() * shape.q_heads * shape.head_dim) * 2;
  const size_t kv_bytes = static_cast<size_t>(shape.tokens() * shape.kv_heads * shape.head_dim) * 2;
  std::vector<DeviceBuffer<std::byte>> owned;
  auto buffer = [&](size_t bytes, int byte) {
    owned.emplace_back(bytes);
    CUDA_CHECK(cudaMemset(owned.back().data(), byte, bytes));
    return static_cast<void*>(owned.back().data());
  };
  // Every input one value (0x3c3c: 0.0115 in bf16, 1.06 in fp16): the plans' relative speed, not
  // the power a real run's data draws.
  std::unordered_map<int64_t, void*> pack = {
      {kQ, buffer(q_bytes, 0x3c)},  {kK, buffer(kv_bytes, 0x3c)}, {kV, buffer(kv_bytes, 0x3c)},
      {kO, buffer(q_bytes, 0x3c)},  {kDO, buffer(q_bytes, 0x3c)}, {kDQ, buffer(q_bytes, 0)},
      {kDK, buffer(kv_bytes, 0)},   {kDV, buffer(kv_bytes, 0)},
      {kStats, buffer(static_cast<size_t>(shape.tokens() * shape.q_heads) * sizeof(float), 0)}};
  const Event start, stop;
  if (cudnnSetStream(handle, nullptr) != CUDNN_STATUS_SUCCESS) throw CudaError("cudnnSetStream failed");
  std::vector<CudnnPlanTime> times;
  for (const bool backward : {false, true}) {
    const fe::graph::Graph& graph = backward ? *graphs.backward : *graphs.forward;
    for (int64_t index = 0; index < graph.get_execution_plan_count(); ++index) {
      CudnnPlanTime time;
      time.backward = backward;
      time.index = index;
      (void)graph.get_plan_name_at_index(index, time.name);
      if (!graph.get_workspace_size_plan_at_index(index, time.workspace).is_good()) {
        time.failure = "no workspace size";
        times.push_back(time);
        continue;
      }
      DeviceBuffer<std::byte> workspace(static_cast<size_t>(std::max<int64_t>(time.workspace, 1)));
      fe::error_t status = graph.execute_plan_at_index(handle, pack, workspace.data(), index);  // the warm-up
      if (!status.is_good()) {
        time.failure = status.get_message();
        times.push_back(time);
        continue;
      }
      start.record(nullptr);
      for (int r = 0; r < repeats; ++r) (void)graph.execute_plan_at_index(handle, pack, workspace.data(), index);
      stop.record(nullptr);
      stop.synchronize();
      time.milliseconds = stop.elapsed_ms_since(start) / std::max(repeats, 1);
      times.push_back(time);
    }
  }
  return times;
}

}  // namespace surogate::cuda

#else  // no cuDNN in this build: every shape is refused, the callers run our kernels.

namespace surogate::cuda {

const CudnnAvailability& cudnn_availability() {
  static const CudnnAvailability none{false, "this build has no cuDNN (frontend headers or libcudnn not found)"};
  return none;
}
std::string cudnn_attention_prepare(const CudnnAttentionShape&) { return cudnn_availability().description; }
size_t cudnn_attention_forward_workspace(const CudnnAttentionShape&) { return 0; }
size_t cudnn_attention_backward_workspace(const CudnnAttentionShape&) { return 0; }
void cudnn_attention_forward(void*, float*, const void*, const void*, const void*, const int32_t*, void*,
                             const CudnnAttentionShape&, cudaStream_t) {
  CUDA_REQUIRE(false, "cuDNN attention: not compiled in");
}
void cudnn_attention_backward(void*, void*, void*, const void*, const void*, const void*, const void*, const void*,
                              const float*, const int32_t*, void*, const CudnnAttentionShape&, cudaStream_t) {
  CUDA_REQUIRE(false, "cuDNN attention: not compiled in");
}
std::vector<CudnnPlanTime> cudnn_attention_time_plans(const CudnnAttentionShape&, int) { return {}; }

}  // namespace surogate::cuda

#endif
