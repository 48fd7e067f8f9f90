// The gloo communicator in worlds of 2 and 3 rank threads: every collective against a serial
// computation of the same result (F32 sums in ring order may differ from the serial order by
// rounding; the inputs here are small integers, so every sum is exact and compared bit for bit),
// BF16 sums, the max of FP8 amaxes, uneven and empty pieces, a rank that never arrives (timeout,
// not a hang), and RankThreads rethrowing a rank's exception.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/bfloat16.h"
#include "distributed/gloo_communicator.h"
#include "distributed/rank_threads.h"
#include "gloo_world_fixture.h"

namespace surogate::distributed {
namespace {

// Rank r's input element i: a small integer, so sums in any order are exact in fp32 and bf16.
float input(int rank, size_t i) { return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 13) % 23) - 11); }

TEST_P(GlooWorld, RanksAndName) {
  for (int rank = 0; rank < world(); ++rank) {
    EXPECT_EQ(communicators_[rank]->rank(), rank);
    EXPECT_EQ(communicators_[rank]->world_size(), world());
    EXPECT_EQ(communicators_[rank]->name(), "gloo");
  }
}

TEST_P(GlooWorld, AllReduceSumsF32AndBf16) {
  const size_t count = 1000003 / 3;  // several of gloo's 1 MiB segments, not a multiple of the world
  std::vector<std::vector<float>> f32(world(), std::vector<float>(count));
  std::vector<std::vector<uint16_t>> bf16(world(), std::vector<uint16_t>(count));
  for (int rank = 0; rank < world(); ++rank) {
    for (size_t i = 0; i < count; ++i) {
      f32[rank][i] = input(rank, i);
      bf16[rank][i] = float_to_bf16(input(rank, i));
    }
  }
  threads_->run([&](int rank) {
    communicators_[rank]->all_reduce_sum(f32[rank].data(), count, DType::F32);
    communicators_[rank]->all_reduce_sum(bf16[rank].data(), count, DType::BF16);
  });
  for (size_t i = 0; i < count; ++i) {
    float expected = 0.0f;
    for (int rank = 0; rank < world(); ++rank) expected += input(rank, i);
    for (int rank = 0; rank < world(); ++rank) {
      ASSERT_EQ(f32[rank][i], expected) << "rank " << rank << " element " << i;
      ASSERT_EQ(bf16_to_float(bf16[rank][i]), expected) << "rank " << rank << " element " << i;
    }
  }
}

// FP8 amaxes: the elementwise max over ranks, NaN and infinity included (bit-pattern order).
TEST_P(GlooWorld, AllReduceAmaxTakesTheLargestOfEveryRank) {
  const size_t count = 1000;
  auto amax = [](int rank, size_t i) -> float {
    if (i == 7 && rank == 1) return std::numeric_limits<float>::quiet_NaN();
    if (i == 9 && rank == 0) return std::numeric_limits<float>::infinity();
    return std::fabs(input(rank, i)) * 0.375f;
  };
  std::vector<std::vector<float>> values(world(), std::vector<float>(count));
  for (int rank = 0; rank < world(); ++rank) {
    for (size_t i = 0; i < count; ++i) values[rank][i] = amax(rank, i);
  }
  threads_->run([&](int rank) { communicators_[rank]->all_reduce_amax(values[rank].data(), count); });
  for (size_t i = 0; i < count; ++i) {
    float expected = 0.0f;
    for (int rank = 0; rank < world(); ++rank) expected = std::max(expected, amax(rank, i));
    for (int rank = 0; rank < world(); ++rank) {
      if (i == 7) {
        ASSERT_TRUE(std::isnan(values[rank][i])) << "rank " << rank;
      } else {
        ASSERT_EQ(values[rank][i], expected) << "rank " << rank << " element " << i;
      }
    }
  }
}

TEST_P(GlooWorld, ReduceScatterLeavesEachRankTheSumOfItsPiece) {
  std::vector<size_t> pieces;
  for (int rank = 0; rank < world(); ++rank) pieces.push_back(rank == 1 ? 0 : 50 + 17 * rank);  // rank 1: empty
  size_t count = 0;
  for (size_t piece : pieces) count += piece;
  std::vector<std::vector<float>> data(world(), std::vector<float>(count));
  for (int rank = 0; rank < world(); ++rank) {
    for (size_t i = 0; i < count; ++i) data[rank][i] = input(rank, i);
  }
  threads_->run([&](int rank) { communicators_[rank]->reduce_scatter_sum(data[rank].data(), pieces, DType::F32); });
  size_t offset = 0;
  for (int rank = 0; rank < world(); ++rank) {
    for (size_t i = offset; i < offset + pieces[rank]; ++i) {
      float expected = 0.0f;
      for (int r = 0; r < world(); ++r) expected += input(r, i);
      ASSERT_EQ(data[rank][i], expected) << "rank " << rank << " element " << i;
    }
    offset += pieces[rank];
  }
}

TEST_P(GlooWorld, AllGatherCopiesEveryOwnersPiece) {
  std::vector<size_t> pieces;
  for (int rank = 0; rank < world(); ++rank) pieces.push_back(rank == 0 ? 0 : 1000 + 333 * rank);
  size_t count = 0;
  for (size_t piece : pieces) count += piece;
  std::vector<std::vector<uint16_t>> data(world(), std::vector<uint16_t>(count, 0xffff));
  size_t offset = 0;
  std::vector<uint16_t> expected(count);
  for (int rank = 0; rank < world(); ++rank) {
    for (size_t i = offset; i < offset + pieces[rank]; ++i) {
      expected[i] = float_to_bf16(input(rank, i));
      data[rank][i] = expected[i];
    }
    offset += pieces[rank];
  }
  threads_->run([&](int rank) { communicators_[rank]->all_gather(data[rank].data(), pieces, DType::BF16); });
  for (int rank = 0; rank < world(); ++rank) EXPECT_EQ(data[rank], expected) << "rank " << rank;
}

TEST_P(GlooWorld, BroadcastFromEveryRootAndBarrier) {
  for (int root = 0; root < world(); ++root) {
    std::vector<std::vector<float>> data(world(), std::vector<float>(777));
    for (int rank = 0; rank < world(); ++rank) {
      for (size_t i = 0; i < 777; ++i) data[rank][i] = input(rank, i);
    }
    threads_->run([&](int rank) {
      communicators_[rank]->barrier();
      communicators_[rank]->broadcast(data[rank].data(), 777, DType::F32, root);
    });
    for (int rank = 0; rank < world(); ++rank) EXPECT_EQ(data[rank], data[root]) << "root " << root;
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, GlooWorld, ::testing::Values(2, 3));

TEST(GlooCommunicator, AWorldOfOneChangesNothing) {
  RankThreads threads(1);
  std::vector<std::unique_ptr<Communicator>> communicators = connect_in_process_gloo(threads);
  std::vector<float> data{1.0f, 2.0f, 3.0f};
  const std::vector<size_t> pieces{3};
  communicators[0]->all_reduce_sum(data.data(), 3, DType::F32);
  communicators[0]->reduce_scatter_sum(data.data(), pieces, DType::F32);
  communicators[0]->all_gather(data.data(), pieces, DType::F32);
  communicators[0]->broadcast(data.data(), 3, DType::F32, 0);
  communicators[0]->barrier();
  EXPECT_EQ(data, (std::vector<float>{1.0f, 2.0f, 3.0f}));
}

// A rank that stops before a collective must not hang the others: its thread closes its
// connections (RankThreads::on_failure), so the peer waiting for it fails at once, long before
// the timeout, with a message naming the collective; run() rethrows the stopped rank's error.
TEST(GlooCommunicator, ARankThatStopsFailsTheOthersAtOnce) {
  RankThreads threads(2);
  std::vector<std::unique_ptr<Communicator>> communicators = connect_in_process_gloo(threads, std::chrono::seconds(60));
  std::vector<std::string> errors(2);
  const auto start = std::chrono::steady_clock::now();
  try {
    threads.run([&](int rank) {
      try {
        if (rank == 1) throw std::runtime_error("rank 1 stopped");
        std::vector<float> data(16, 1.0f);
        communicators[rank]->all_reduce_sum(data.data(), data.size(), DType::F32);
      } catch (const std::exception& error) {
        errors[rank] = error.what();
        throw;
      }
    });
    FAIL() << "run() returned normally";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "rank 1 stopped");  // the cause, not the peer's failure
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(errors[1], "rank 1 stopped");
  EXPECT_NE(errors[0].find("rank 0 of 2: the all-reduce failed"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("another rank stopped or is stuck"), std::string::npos) << errors[0];
}

// A rank that is stuck (not failed) is caught by the timeout; the failed peer then closes its
// connections, so the late rank's collective fails at once too.
TEST(GlooCommunicator, AStuckRankFailsItsPeerAfterTheTimeout) {
  RankThreads threads(2);
  std::vector<std::unique_ptr<Communicator>> communicators = connect_in_process_gloo(threads, std::chrono::seconds(1));
  std::vector<std::string> errors(2);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(threads.run([&](int rank) {
    try {
      if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(3));
      std::vector<float> data(16, 1.0f);
      communicators[rank]->all_reduce_sum(data.data(), data.size(), DType::F32);
    } catch (const std::exception& error) {
      errors[rank] = error.what();
      throw;
    }
  }), std::exception);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_NE(errors[0].find("rank 0 of 2: the all-reduce failed"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank 1 of 2: the all-reduce failed"), std::string::npos) << errors[1];
}

TEST(RankThreads, RunsEveryRankAndRethrowsARanksError) {
  RankThreads threads(3);
  std::vector<int> seen(3, 0);
  threads.run([&](int rank) { seen[rank] += rank + 1; });
  threads.run([&](int rank) { seen[rank] += rank + 1; });
  EXPECT_EQ(seen, (std::vector<int>{2, 4, 6}));
  EXPECT_THROW(threads.run([](int rank) {
    if (rank == 2) throw std::runtime_error("rank 2 failed");
  }), std::runtime_error);
  threads.run([&](int rank) { seen[rank] = 0; });  // still usable after an error
  EXPECT_EQ(seen, (std::vector<int>{0, 0, 0}));
}

}  // namespace
}  // namespace surogate::distributed
