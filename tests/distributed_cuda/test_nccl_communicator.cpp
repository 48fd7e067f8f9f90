// The NCCL communicator in a world of every visible GPU (one thread each; a world of one on a
// single-GPU machine): each collective against a serial computation on the host, F32 and BF16,
// equal pieces (NCCL's own reduce-scatter / all-gather) and uneven ones (grouped reduce /
// broadcast), and the max of FP8 amaxes (NaN and infinity included, bit-pattern order). Inputs are
// small integers, so every sum is exact and compared bit for bit.
#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/bfloat16.h"
#include "cuda/cuda_check.h"
#include "distributed/nccl_communicator.h"

namespace surogate::distributed {
namespace {

float input(int rank, size_t i) { return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 13) % 23) - 11); }

class NcclWorld : public ::testing::Test {
protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no GPU visible";
    world_ = devices;
    threads_ = std::make_unique<RankThreads>(world_);
    streams_.assign(static_cast<size_t>(world_), nullptr);
    threads_->run([&](int rank) {
      CUDA_CHECK(cudaSetDevice(rank));
      cudaStream_t stream;
      CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      streams_[static_cast<size_t>(rank)] = stream;
    });
    communicators_ = connect_in_process_nccl(*threads_, streams_);
  }
  void TearDown() override {
    communicators_.clear();
    if (threads_) {
      threads_->run([&](int rank) {
        cudaSetDevice(rank);
        cudaStreamDestroy(static_cast<cudaStream_t>(streams_[static_cast<size_t>(rank)]));
      });
    }
  }

  // Runs `collective` on every rank over a device copy of host[rank], and copies the result back.
  template <typename T, typename Collective>
  void on_device(std::vector<std::vector<T>>& host, Collective collective) {
    threads_->run([&](int rank) {
      std::vector<T>& values = host[static_cast<size_t>(rank)];
      CUDA_CHECK(cudaSetDevice(rank));
      void* device = nullptr;
      CUDA_CHECK(cudaMalloc(&device, values.size() * sizeof(T) + 1));
      CUDA_CHECK(cudaMemcpy(device, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice));
      collective(*communicators_[static_cast<size_t>(rank)], device);
      CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(streams_[static_cast<size_t>(rank)])));
      CUDA_CHECK(cudaMemcpy(values.data(), device, values.size() * sizeof(T), cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaFree(device));
    });
  }

  int world_ = 0;
  std::unique_ptr<RankThreads> threads_;
  std::vector<void*> streams_;
  std::vector<std::unique_ptr<Communicator>> communicators_;
};

TEST_F(NcclWorld, RanksAndName) {
  for (int rank = 0; rank < world_; ++rank) {
    EXPECT_EQ(communicators_[rank]->rank(), rank);
    EXPECT_EQ(communicators_[rank]->world_size(), world_);
    EXPECT_EQ(communicators_[rank]->name(), "nccl");
  }
}

TEST_F(NcclWorld, AllReduceSumsF32AndBf16) {
  const size_t count = 333337;
  std::vector<std::vector<float>> f32(world_, std::vector<float>(count));
  std::vector<std::vector<uint16_t>> bf16(world_, std::vector<uint16_t>(count));
  for (int rank = 0; rank < world_; ++rank) {
    for (size_t i = 0; i < count; ++i) {
      f32[rank][i] = input(rank, i);
      bf16[rank][i] = float_to_bf16(input(rank, i));
    }
  }
  on_device(f32, [&](Communicator& c, void* data) { c.all_reduce_sum(data, count, DType::F32); });
  on_device(bf16, [&](Communicator& c, void* data) { c.all_reduce_sum(data, count, DType::BF16); });
  for (size_t i = 0; i < count; ++i) {
    float expected = 0.0f;
    for (int rank = 0; rank < world_; ++rank) expected += input(rank, i);
    for (int rank = 0; rank < world_; ++rank) {
      ASSERT_EQ(f32[rank][i], expected) << "rank " << rank << " element " << i;
      ASSERT_EQ(bf16_to_float(bf16[rank][i]), expected) << "rank " << rank << " element " << i;
    }
  }
}

TEST_F(NcclWorld, AllReduceAmaxTakesTheLargestOfEveryRank) {
  const size_t count = 1000;
  auto amax = [](int rank, size_t i) -> float {
    if (i == 7) return rank == 0 ? std::numeric_limits<float>::quiet_NaN() : 1.0f;
    if (i == 9) return rank == 0 ? std::numeric_limits<float>::infinity() : 2.0f;
    return std::fabs(input(rank, i)) * 0.375f;
  };
  std::vector<std::vector<float>> values(world_, std::vector<float>(count));
  for (int rank = 0; rank < world_; ++rank) {
    for (size_t i = 0; i < count; ++i) values[rank][i] = amax(rank, i);
  }
  on_device(values, [&](Communicator& c, void* data) { c.all_reduce_amax(static_cast<float*>(data), count); });
  for (size_t i = 0; i < count; ++i) {
    float expected = 0.0f;
    for (int rank = 0; rank < world_; ++rank) expected = std::max(expected, amax(rank, i));
    for (int rank = 0; rank < world_; ++rank) {
      if (i == 7) {
        ASSERT_TRUE(std::isnan(values[rank][i])) << "rank " << rank;
      } else {
        ASSERT_EQ(values[rank][i], i == 9 ? std::numeric_limits<float>::infinity() : expected) << "rank " << rank << " element " << i;
      }
    }
  }
}

TEST_F(NcclWorld, ReduceScatterWithEqualAndUnevenPieces) {
  for (bool uneven : {false, true}) {
    std::vector<size_t> pieces;
    for (int rank = 0; rank < world_; ++rank) pieces.push_back(uneven ? 100 + 37 * rank : 256);
    size_t count = 0;
    for (size_t piece : pieces) count += piece;
    std::vector<std::vector<float>> data(world_, std::vector<float>(count));
    for (int rank = 0; rank < world_; ++rank) {
      for (size_t i = 0; i < count; ++i) data[rank][i] = input(rank, i);
    }
    on_device(data, [&](Communicator& c, void* buffer) { c.reduce_scatter_sum(buffer, pieces, DType::F32); });
    size_t offset = 0;
    for (int rank = 0; rank < world_; ++rank) {
      for (size_t i = offset; i < offset + pieces[rank]; ++i) {
        float expected = 0.0f;
        for (int r = 0; r < world_; ++r) expected += input(r, i);
        ASSERT_EQ(data[rank][i], expected) << "uneven " << uneven << " rank " << rank << " element " << i;
      }
      offset += pieces[rank];
    }
  }
}

TEST_F(NcclWorld, AllGatherWithEqualAndUnevenPieces) {
  for (bool uneven : {false, true}) {
    std::vector<size_t> pieces;
    for (int rank = 0; rank < world_; ++rank) pieces.push_back(uneven ? 1000 + 333 * rank : 512);
    size_t count = 0;
    for (size_t piece : pieces) count += piece;
    std::vector<std::vector<uint16_t>> data(world_, std::vector<uint16_t>(count, 0xffff));
    std::vector<uint16_t> expected(count);
    size_t offset = 0;
    for (int rank = 0; rank < world_; ++rank) {
      for (size_t i = offset; i < offset + pieces[rank]; ++i) data[rank][i] = expected[i] = float_to_bf16(input(rank, i));
      offset += pieces[rank];
    }
    on_device(data, [&](Communicator& c, void* buffer) { c.all_gather(buffer, pieces, DType::BF16); });
    for (int rank = 0; rank < world_; ++rank) EXPECT_EQ(data[rank], expected) << "uneven " << uneven << " rank " << rank;
  }
}

TEST_F(NcclWorld, BroadcastFromEveryRootAndBarrier) {
  for (int root = 0; root < world_; ++root) {
    std::vector<std::vector<float>> data(world_, std::vector<float>(777));
    for (int rank = 0; rank < world_; ++rank) {
      for (size_t i = 0; i < 777; ++i) data[rank][i] = input(rank, i);
    }
    const std::vector<float> expected = data[root];
    on_device(data, [&](Communicator& c, void* buffer) {
      c.barrier();
      c.broadcast(buffer, 777, DType::F32, root);
    });
    for (int rank = 0; rank < world_; ++rank) EXPECT_EQ(data[rank], expected) << "root " << root;
  }
}

// A rank thread that fails while its peers wait in a collective for it (as one that runs out of
// memory mid-step): the failure hook of RankThreads sets the process's flag, so the others' wait
// (synchronize) aborts at once with a RankFailure, not after the 10-minute timeout, and run()
// rethrows the failing rank's own error. Needs 2 GPUs.
TEST_F(NcclWorld, ARankThreadThatFailsStopsItsPeersAtOnce) {
  if (world_ < 2) GTEST_SKIP() << "needs 2 GPUs";
  // One collective first: NCCL connects the ranks lazily, inside the first collective's call,
  // which would wait for the failed rank before synchronize() could see the flag.
  std::vector<std::vector<float>> warm(static_cast<size_t>(world_), std::vector<float>(64, 1.0f));
  on_device(warm, [](Communicator& communicator, void* data) {
    communicator.all_reduce_sum(data, 64, DType::F32);
    communicator.synchronize();
  });
  std::vector<std::string> errors(static_cast<size_t>(world_));
  const auto start = std::chrono::steady_clock::now();
  try {
    threads_->run([&](int rank) {
      try {
        if (rank == 1) throw std::runtime_error("rank 1 ran out of memory");
        CUDA_CHECK(cudaSetDevice(rank));
        void* device = nullptr;
        CUDA_CHECK(cudaMalloc(&device, 64 * sizeof(float)));
        communicators_[static_cast<size_t>(rank)]->all_reduce_sum(device, 64, DType::F32);
        communicators_[static_cast<size_t>(rank)]->synchronize();
      } catch (const std::exception& error) {
        errors[static_cast<size_t>(rank)] = error.what();
        throw;
      }
    });
    FAIL() << "run() returned normally";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "rank 1 ran out of memory");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_NE(errors[0].find("another rank thread of this process failed"), std::string::npos) << errors[0];
  communicators_.clear();  // aborted ones are released without waiting for their streams
}

}  // namespace
}  // namespace surogate::distributed
