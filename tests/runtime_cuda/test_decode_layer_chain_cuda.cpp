// One request's decode layer chain at Qwen3-8B's shapes (bench/decode_layer_chain.h: every kernel
// launched programmatically, as the decode graph launches it) captured in a CUDA graph and replayed
// equals the same chain launched eagerly (outside a capture the programmatic attribute is off), bit
// for bit. Before every run the buffers between the kernels are poisoned (NaN) and the residual
// stream restored: a kernel reading its predecessor's output before its wait — as decode_gemv's
// non-coherent load of x did at 8 rows a block until 2026-11-30 — reads the poison or a stale value,
// and the stream after the last layer differs. Two layers with hashed weights, 640 cached tokens; the
// default blocking (8 rows a block since 2026-11-30), 4 rows a block with SwiGLU at 16, and the q/k
// norm launched apart.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/hashed_weights.h"
#include "cuda/test_helpers.h"
#include "decode_layer_chain.h"

namespace surogate::cuda::testing {
namespace {

namespace chain = surogate::bench::decode_chain;

constexpr int kChainLayers = 2;
constexpr int64_t kContext = 640;

// Hashed bf16 in [-1/16, 1/16) (a power-of-two scale: still exact in bf16), a fresh range each call.
DeviceBuffer<__nv_bfloat16> hashed(int64_t elements) {
  static uint64_t next = 0;
  std::vector<Bf16> bits(static_cast<size_t>(elements));
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = float_to_bf16(bf16_to_float(hashed_bf16(next + i)) / 16.0f);
  next += bits.size();
  DeviceBuffer<__nv_bfloat16> out(bits.size());
  CUDA_CHECK(cudaMemcpy(out.data(), bits.data(), out.bytes(), cudaMemcpyHostToDevice));
  return out;
}

void fill_ones(DeviceBuffer<__nv_bfloat16>& buffer) {
  const std::vector<Bf16> ones(buffer.size(), float_to_bf16(1.0f));
  CUDA_CHECK(cudaMemcpy(buffer.data(), ones.data(), buffer.bytes(), cudaMemcpyHostToDevice));
}

std::vector<float> floats(const DeviceBuffer<__nv_bfloat16>& buffer) {
  const std::vector<__nv_bfloat16> values = buffer.download();
  std::vector<Bf16> bits(values.size());
  std::memcpy(bits.data(), values.data(), bits.size() * sizeof(Bf16));
  return from_bf16(bits);
}

struct ChainOutput {
  std::vector<float> stream, pending;
  bool operator==(const ChainOutput&) const = default;
};

class ChainRunner {
 public:
  ChainRunner() : layers_(kContext, kChainLayers, hashed), stream_in_(hashed(chain::kHidden)), pending_in_(hashed(chain::kHidden)) {
    for (DeviceBuffer<__nv_bfloat16>* weight : {&layers_.norm_weight, &layers_.q_norm, &layers_.k_norm}) fill_ones(*weight);
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~ChainRunner() { cudaStreamDestroy(stream_); }

  // The residual stream restored, every buffer between kernels poisoned (in stream order).
  void reset() {
    CUDA_CHECK(cudaMemcpyAsync(layers_.stream_a.data(), stream_in_.data(), stream_in_.bytes(), cudaMemcpyDeviceToDevice, stream_));
    CUDA_CHECK(cudaMemcpyAsync(layers_.pending.data(), pending_in_.data(), pending_in_.bytes(), cudaMemcpyDeviceToDevice, stream_));
    for (DeviceBuffer<__nv_bfloat16>* buffer : {&layers_.stream_b, &layers_.normed, &layers_.qkv, &layers_.attention, &layers_.act}) {
      buffer->poison(stream_);
    }
    layers_.workspace.poison(stream_);
    layers_.rstd.poison(stream_);
    if (layers_.norm_scratch.size() > 0) layers_.norm_scratch.poison(stream_);
  }

  void launch(const chain::Variant& variant) {
    for (int layer = 0; layer < kChainLayers; ++layer) layers_.layer(layer, variant, stream_);
  }

  ChainOutput result() {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return ChainOutput{floats(layers_.stream_a), floats(layers_.pending)};
  }

  ChainOutput eager(const chain::Variant& variant) {
    reset();
    launch(variant);
    return result();
  }

  // Captured once, then replayed `replays` times, each after a reset; every replay's result.
  std::vector<ChainOutput> replayed(const chain::Variant& variant, int replays) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    launch(variant);
    CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    std::vector<ChainOutput> runs;
    for (int replay = 0; replay < replays; ++replay) {
      reset();
      CUDA_CHECK(cudaGraphLaunch(exec, stream_));
      runs.push_back(result());
    }
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    return runs;
  }

 private:
  chain::Layers layers_;
  DeviceBuffer<__nv_bfloat16> stream_in_, pending_in_;
  cudaStream_t stream_{};
};

TEST(DecodeLayerChainCuda, CapturedWithProgrammaticLaunchesEqualsTheEagerChain) {
  SKIP_WITHOUT_GPU();
  ChainRunner runner;
  const std::vector<chain::Variant> variants = {
      {.name = "as the decode graph runs it"},
      {.name = "4 rows a block, SwiGLU 16", .qkv_rows = 4, .o_rows = 4, .swiglu_rows = 16, .down_rows = 4},
      {.name = "the q/k norm launched apart", .fold_qk_norm = false}};
  for (const chain::Variant& variant : variants) {
    const ChainOutput eager = runner.eager(variant);
    for (float value : eager.stream) ASSERT_TRUE(std::isfinite(value)) << variant.name << ": the eager chain left a NaN";
    ASSERT_EQ(runner.eager(variant), eager) << variant.name << ": the eager chain differs between runs";
    const std::vector<ChainOutput> runs = runner.replayed(variant, 4);
    for (size_t replay = 0; replay < runs.size(); ++replay) {
      EXPECT_TRUE(runs[replay] == eager) << variant.name << ", replay " << replay << ": not the eager chain's bits";
    }
  }
}

}  // namespace
}  // namespace surogate::cuda::testing
