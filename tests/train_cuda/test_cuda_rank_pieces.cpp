// Pieces of a CUDA rank's state (train/device/cuda_rank/): a layout's runs (what ZeRO's shards and
// a pipeline stage's optimizer address) from the flat offsets alone, and the gradient accumulators
// — each add sums the micro-batch's bf16 gradients exactly into fp32 and zeroes them, a deferred
// zero() makes the next add over every tensor overwrite (no stale sum survives), and any other
// reader gets zeros. Values are bf16-exact so every sum is exact. Then ZeRO-1's bf16 publish
// through the masters, and its overlap with the next micro-batch (cuda_publish_overlap.h): with the
// side stream held up by a host function, the compute stream reads each bucket only after the
// bucket's exchange (a wait before its first reader's step), settle() orders it after the last
// bucket, and once a micro-batch has run or the publish settled nothing waits any more. The GPU
// tests skip with the reason without one; the layout test runs anywhere.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <thread>
#include <string>
#include <vector>

#include "core/bfloat16.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/device_info.h"
#include "train/device/cuda_rank/gradient_accumulators.h"
#include "train/device/cuda_rank/masters.h"
#include "train/device/cuda_rank/trainable_layout.h"
#include "train/device/cuda_publish_overlap.h"

namespace surogate::train {
namespace {

// Three trainable tensors of 5, 4 and 7 elements: offsets 0, 8 and 12 (starts rounded to 4).
CudaTrainableLayout three_tensors() {
  CudaTrainableLayout layout;
  layout.entries = {{0, 0, 1, 0, 5}, {1, 2, 3, 8, 4}, {2, 4, 5, 12, 7}};
  layout.total = 20;
  return layout;
}

TEST(CudaRankPieces, ARunIsTheFlatSpanOfItsTensorsPaddingIncluded) {
  const CudaTrainableLayout layout = three_tensors();
  const FlatRun whole = layout.run(1, 2, true);
  EXPECT_EQ(whole.first, 0u);
  EXPECT_EQ(whole.end, 3u);
  EXPECT_EQ(whole.base, 0);
  EXPECT_EQ(whole.count, 20);
  const FlatRun first = layout.run(0, 1);
  EXPECT_EQ(first.base, 0);
  EXPECT_EQ(first.count, 8);  // 5 elements and their padding
  const FlatRun tail = layout.run(1, 3);
  EXPECT_EQ(tail.base, 8);
  EXPECT_EQ(tail.count, 12);
  EXPECT_TRUE(tail.contains(1) && tail.contains(2) && !tail.contains(0));
  const FlatRun empty = layout.run(3, 3);  // a rank whose shard holds no tensor
  EXPECT_EQ(empty.base, 20);
  EXPECT_EQ(empty.count, 0);
}

std::vector<float> read(CudaGradientAccumulators& accumulators, size_t count) {
  std::vector<float> values(count);
  CUDA_CHECK(cudaMemcpy(values.data(), accumulators.data(), count * sizeof(float), cudaMemcpyDeviceToHost));
  return values;
}

TEST(CudaRankPieces, AccumulatorsAddExactlyAndADeferredZeroIsOverwrittenByTheNextAdd) {
  std::string reason;
  if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  const CudaTrainableLayout layout = three_tensors();
  std::vector<cuda::DeviceBuffer<uint16_t>> gradients;
  std::vector<__nv_bfloat16*> addresses;
  for (const CudaTrainable& entry : layout.entries) {
    gradients.push_back(cuda::DeviceBuffer<uint16_t>(static_cast<size_t>(entry.count)));
    addresses.push_back(reinterpret_cast<__nv_bfloat16*>(gradients.back().data()));
  }
  // Micro-batch m's gradient of element k of tensor t: (m + 1) · (t + 1) · (k + 1) / 4, bf16-exact.
  const auto micro_batch = [&](int m) {
    for (size_t t = 0; t < gradients.size(); ++t) {
      std::vector<uint16_t> bits;
      for (int64_t k = 0; k < layout.entries[t].count; ++k) {
        bits.push_back(float_to_bf16(static_cast<float>((m + 1) * static_cast<int>(t + 1) * (k + 1)) / 4.0f));
      }
      gradients[t].upload(bits);
    }
  };
  const auto expected = [&](std::vector<int> batches) {
    std::vector<float> values(static_cast<size_t>(layout.total), 0.0f);
    for (int m : batches) {
      for (size_t t = 0; t < layout.entries.size(); ++t) {
        for (int64_t k = 0; k < layout.entries[t].count; ++k) {
          values[static_cast<size_t>(layout.entries[t].offset + k)] +=
              static_cast<float>((m + 1) * static_cast<int>(t + 1) * (k + 1)) / 4.0f;
        }
      }
    }
    return values;
  };
  const cuda::GradientCounts counts(std::vector<int64_t>{5, 4, 7});
  CudaGradientAccumulators accumulators(layout, layout.run(0, 3, true), false, false, false, false, addresses, false,
                                        counts, nullptr);
  EXPECT_EQ(accumulators.dtype(), DType::F32);
  EXPECT_EQ(accumulators.bytes(), 20u * sizeof(float));
  micro_batch(0);
  accumulators.add(0, 3);
  micro_batch(1);
  accumulators.add(0, 3);
  EXPECT_EQ(read(accumulators, 20), expected({0, 1}));
  // The plan's gradients were zeroed by each add.
  EXPECT_EQ(gradients[2].download(), std::vector<uint16_t>(7, 0));
  // Deferred: zero() only marks them; the next add over every tensor overwrites the stale sums.
  accumulators.defer_zeroing();
  accumulators.zero();
  micro_batch(2);
  accumulators.add(0, 3);
  EXPECT_EQ(read(accumulators, 20), expected({2}));
  // Any other reader (here data()) gets zeros when the zeroing is still owed.
  accumulators.zero();
  EXPECT_EQ(read(accumulators, 20), std::vector<float>(20, 0.0f));
}

// ZeRO-1's bf16 publish on a GPU replica (train/device/shard_publish.h), the all-gather aside: the
// rank rounds its shard's masters into the flat publish buffer exactly as the old fp32 publish's
// refresh rounded them on every other rank (so a replica trains the same bits), and copies the
// other units' bf16 weights out of the buffer unchanged, leaving its own weights alone.
TEST(CudaRankPieces, TheBf16PublishRoundsTheShardsMastersAsTheRefreshDidAndCopiesTheOtherUnitsOut) {
  std::string reason;
  if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  const CudaTrainableLayout layout = three_tensors();
  constexpr uint16_t kUntouched = 0x7f7f;
  std::vector<cuda::DeviceBuffer<uint16_t>> weights;
  std::vector<__nv_bfloat16*> addresses;
  for (const CudaTrainable& entry : layout.entries) {
    weights.push_back(cuda::DeviceBuffer<uint16_t>(static_cast<size_t>(entry.count)));
    weights.back().upload(std::vector<uint16_t>(static_cast<size_t>(entry.count), kUntouched));
    addresses.push_back(reinterpret_cast<__nv_bfloat16*>(weights.back().data()));
  }
  const cuda::GradientCounts counts(std::vector<int64_t>{5, 4, 7});
  CudaMasters masters(layout, layout.run(0, 3, true), false, false, false, addresses, false, counts);
  // Masters that need rounding, ties to even among them: 1 + 2^-8 is halfway between two bf16 values.
  std::vector<float> values(20, 0.0f);
  for (int64_t k = 0; k < 5; ++k) values[static_cast<size_t>(k)] = 1.0f + std::ldexp(1.0f, -8) * static_cast<float>(k + 1) / 3.0f;
  values[4] = 1.0f + std::ldexp(1.0f, -8);
  CUDA_CHECK(cudaMemcpy(masters.data(), values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice));
  cuda::DeviceBuffer<uint16_t> flat(20);
  flat.upload(std::vector<uint16_t>(20, 0));
  masters.set_publish_buffer(reinterpret_cast<__nv_bfloat16*>(flat.data()));

  // This rank's shard is unit 0; the other rank's piece (units 1 and 2) arrives as the all-gather
  // would leave it.
  masters.round_into_publish_buffer(0, 1, nullptr);
  std::vector<uint16_t> gathered = flat.download();
  for (size_t i = 8; i < 20; ++i) gathered[i] = float_to_bf16(static_cast<float>(i) - 9.5f);
  flat.upload(gathered);
  masters.weights_from_publish_buffer(1, 3, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());

  EXPECT_EQ(weights[0].download(), std::vector<uint16_t>(5, kUntouched));  // its own: the optimizer's
  EXPECT_EQ(weights[1].download(), std::vector<uint16_t>(gathered.begin() + 8, gathered.begin() + 12));
  EXPECT_EQ(weights[2].download(), std::vector<uint16_t>(gathered.begin() + 12, gathered.begin() + 19));
  // The published unit 0 is what the fp32 publish's refresh wrote on the other ranks, bit for bit.
  masters.refresh_weights(0, 1, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> refreshed = weights[0].download();
  EXPECT_EQ(std::vector<uint16_t>(gathered.begin(), gathered.begin() + 5), refreshed);
  EXPECT_EQ(refreshed[4], float_to_bf16(1.0f));  // the tie went to even
}

// Holds up the stream it is enqueued on (a host function blocks the stream until it returns).
void CUDART_CB hold_stream(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(150)); }

TEST(CudaRankPieces, TheOverlappedPublishIsReadOnlyAfterEachBucketsExchangeAndSettleWaitsForAll) {
  std::string reason;
  if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  // Two units read by steps 0 and 2 of a three-step plan, one bucket each.
  compiler::ExecutionPlan plan;
  std::vector<graph::TensorId> weights;
  for (int w = 0; w < 2; ++w) {
    weights.push_back(plan.graph.add_tensor({"w" + std::to_string(w), {}, graph::TensorRole::Parameter}));
  }
  for (int step = 0; step < 3; ++step) {
    graph::Node node{"step" + std::to_string(step), "toy"};
    if (step != 1) node.inputs.push_back(weights[static_cast<size_t>(step / 2)]);
    plan.steps.push_back({plan.graph.add_node(std::move(node))});
  }
  const std::vector<GradientBucket> buckets = {{0, 1, 0, 4, 0, {4, 0}}, {1, 2, 4, 8, 0, {0, 4}}};
  cuda::Stream compute, side;
  CudaPublishOverlap overlap(plan, buckets, weights, compute.get(), side.get());
  EXPECT_FALSE(overlap.in_flight());
  overlap.settle();  // before any publish: nothing to wait for

  // The buckets' weights (4 floats each), written by the exchange on the side stream, and what the
  // compute stream read of them; `arriving` holds what two exchanges bring (10, 11 and 20, 21).
  cuda::DeviceBuffer<float> published(8), read(8), arriving(16);
  published.upload(std::vector<float>(8, 0.0f));
  arriving.upload(std::vector<float>{10, 10, 10, 10, 11, 11, 11, 11, 20, 20, 20, 20, 21, 21, 21, 21});
  const auto exchange = [&](size_t which) {
    overlap.begin();
    for (size_t b = 0; b < buckets.size(); ++b) {
      CUDA_CHECK(cudaLaunchHostFunc(side.get(), hold_stream, nullptr));
      CUDA_CHECK(cudaMemcpyAsync(published.data() + 4 * b, arriving.data() + 8 * which + 4 * b, 4 * sizeof(float),
                                 cudaMemcpyDeviceToDevice, side.get()));
      overlap.published(b);
    }
  };
  const auto read_bucket = [&](size_t b) {
    CUDA_CHECK(cudaMemcpyAsync(read.data() + 4 * b, published.data() + 4 * b, 4 * sizeof(float),
                               cudaMemcpyDeviceToDevice, compute.get()));
  };

  // A micro-batch after the exchange: each bucket is waited for before its first reader.
  exchange(0);
  EXPECT_TRUE(overlap.in_flight());
  for (size_t step = 0; step < 3; ++step) {
    overlap.before_step(step);
    if (step != 1) read_bucket(step / 2);
    overlap.after_step(step);
  }
  EXPECT_FALSE(overlap.in_flight());
  CUDA_CHECK(cudaStreamSynchronize(compute.get()));
  EXPECT_EQ(read.download(), (std::vector<float>{10, 10, 10, 10, 11, 11, 11, 11}));

  // Anything else settles first: the compute stream is then behind the last bucket.
  exchange(1);
  overlap.settle();
  EXPECT_FALSE(overlap.in_flight());
  read_bucket(1);
  read_bucket(0);
  CUDA_CHECK(cudaStreamSynchronize(compute.get()));
  EXPECT_EQ(read.download(), (std::vector<float>{20, 20, 20, 20, 21, 21, 21, 21}));
  CUDA_CHECK(cudaStreamSynchronize(side.get()));
}

}  // namespace
}  // namespace surogate::train
