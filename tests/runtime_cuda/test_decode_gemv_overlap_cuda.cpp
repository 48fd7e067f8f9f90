// decode_gemv's programmatic dependent launch (DecodeGemvShape::overlap_previous, Hopper PDL): a
// chain of kernels, each reading the output (x, addend) of the kernel just before it, captured in a
// CUDA graph with the overlap on and replayed, equals the same chain launched plainly, bit for bit
// (the kernels and their sum orders are the same; only when they start differs). Before every
// replay the intermediate outputs are poisoned (NaN): a launch that read x or its addend before the
// previous kernel had finished would read the poison or a stale value, and the final output would
// differ. Eight replays per row count and blocking, to give a race a chance to show; the blockings
// include 8 rows a block (16 for SwiGLU), where the compiler once hoisted a non-coherent load of x
// above the wait (programmatic_launch.cuh). On GPUs before sm_90 (and outside a capture) the
// overlap does nothing and the test checks the plain chain against itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/hashed_weights.h"
#include "cuda/kernels/decode_gemv.h"
#include "cuda/kernels/small_m_linear.h"
#include "cuda/test_helpers.h"

namespace surogate::cuda::testing {
namespace {

using Weight = DecodeGemvWeight<__nv_bfloat16>;

DeviceBuffer<Bf16> hashed_weight(int64_t out, int64_t in, uint64_t seed) {
  std::vector<Bf16> bits(static_cast<size_t>(out * in));
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = hashed_bf16((seed << 40) + i);  // disjoint index ranges per weight
  return to_device(bits);
}

// x0 -[small_m_linear, wide]-> a -[decode_gemv + x0]-> b -[decode_gemv_swiglu]-> c -[decode_gemv + b]-> d
struct Chain {
  static constexpr int64_t kHidden = 4096, kWide = 8192, kFfn = 1024;
  int64_t rows;
  DeviceBuffer<Bf16> wa = hashed_weight(kWide, kHidden, 1), wb = hashed_weight(kHidden, kWide, 2),
                     gate = hashed_weight(kFfn, kHidden, 3), up = hashed_weight(kFfn, kHidden, 4),
                     wd = hashed_weight(kHidden, kFfn, 5);
  DeviceBuffer<Bf16> x0, a, b, c, d;

  explicit Chain(int64_t m)
      : rows(m), x0(device_bf16(random_floats(static_cast<size_t>(m * kHidden)))), a(static_cast<size_t>(m * kWide)),
        b(static_cast<size_t>(m * kHidden)), c(static_cast<size_t>(m * kFfn)), d(static_cast<size_t>(m * kHidden)) {}

  void poison(cudaStream_t stream) {
    for (DeviceBuffer<Bf16>* buffer : {&a, &b, &c, &d}) buffer->poison(stream);
  }

  // rows_per_block of the plain GEMVs and of the SwiGLU one (0: the kernel's rule).
  void launch(bool overlap, int rows_per_block, int swiglu_rows_per_block, cudaStream_t stream) {
    small_m_linear(bf16_ptr(a), bf16_ptr(x0), bf16_ptr(wa), static_cast<const __nv_bfloat16*>(nullptr),
                   static_cast<const __nv_bfloat16*>(nullptr), {.rows = rows, .out = kWide, .in = kHidden}, stream);
    const Weight to_b{.weight = bf16_ptr(wb), .out = bf16_ptr(b), .rows = kHidden, .addend = bf16_ptr(x0)};
    decode_gemv(&to_b, 1, bf16_ptr(a),
                {.rows = rows, .in = kWide, .rows_per_block = rows_per_block, .overlap_previous = overlap}, stream);
    decode_gemv_swiglu(bf16_ptr(c), bf16_ptr(b), bf16_ptr(gate), bf16_ptr(up), kFfn,
                       {.rows = rows, .in = kHidden, .rows_per_block = swiglu_rows_per_block, .overlap_previous = overlap},
                       stream);
    const Weight to_d{.weight = bf16_ptr(wd), .out = bf16_ptr(d), .rows = kHidden, .addend = bf16_ptr(b)};
    decode_gemv(&to_d, 1, bf16_ptr(c),
                {.rows = rows, .in = kFfn, .rows_per_block = rows_per_block, .overlap_previous = overlap}, stream);
  }
};

TEST(CudaDecodeGemv, OverlappedLaunchesInAGraphEqualThePlainChain) {
  SKIP_WITHOUT_GPU();
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  struct Blocking {
    int plain, swiglu;  // rows a block of the plain GEMVs and of the SwiGLU one (0: the kernel's rule)
  };
  for (const Blocking blocking : {Blocking{4, 8}, Blocking{8, 16}, Blocking{0, 0}}) {
    for (int64_t rows = 1; rows <= kDecodeGemvMaxRows; ++rows) {
      const std::string where = "M=" + std::to_string(rows) + ", " + std::to_string(blocking.plain) + " / " +
                                std::to_string(blocking.swiglu) + " rows a block";
      Chain chain(rows);
      chain.poison(stream);
      chain.launch(false, blocking.plain, blocking.swiglu, stream);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      const std::vector<float> plain = download_bf16(chain.d);
      for (float value : plain) ASSERT_TRUE(std::isfinite(value)) << where << ": the plain chain left a NaN";

      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      chain.launch(true, blocking.plain, blocking.swiglu, stream);
      CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
      CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      for (int replay = 0; replay < 8; ++replay) {
        chain.poison(stream);
        CUDA_CHECK(cudaGraphLaunch(exec, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        EXPECT_EQ(download_bf16(chain.d), plain) << where << ", replay " << replay;
      }
      CUDA_CHECK(cudaGraphExecDestroy(exec));
      CUDA_CHECK(cudaGraphDestroy(graph));
      // Outside a capture the overlap is off: the eager chain with it asked for is the plain one too.
      chain.poison(stream);
      chain.launch(true, blocking.plain, blocking.swiglu, stream);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      EXPECT_EQ(download_bf16(chain.d), plain) << where << ", eager";
    }
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace surogate::cuda::testing
