// GRPO on data-parallel ranks (train/objective/grpo_rank_models.h): the window order of a step's
// completions, sampled rank by rank. Every window micro-batch holds completions of the rank that
// trains it (distributed::owner_of_micro_batch), that rank's k-th micro-batch its completions
// [k·batch, (k+1)·batch) in order; every completion appears once; one rank keeps the generation order.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "distributed/parallel_layout.h"
#include "train/objective/grpo_rank_models.h"

namespace surogate::train {
namespace {

TEST(GrpoWindowOrder, EachMicroBatchHoldsTheCompletionsOfTheRankThatTrainsIt) {
  for (const int64_t ranks : {1, 2, 3}) {
    for (const int64_t accumulation : {1, 2, 4}) {
      for (const int64_t batch : {1, 3, 8}) {
        SCOPED_TRACE(std::to_string(ranks) + " ranks, " + std::to_string(accumulation) + " × " + std::to_string(batch));
        const std::vector<size_t> order = grpo_window_order(ranks, accumulation, batch);
        const int64_t per_rank = accumulation * batch;
        ASSERT_EQ(static_cast<int64_t>(order.size()), ranks * per_rank);
        std::vector<size_t> sorted = order;
        std::sort(sorted.begin(), sorted.end());
        std::vector<size_t> every(order.size());
        std::iota(every.begin(), every.end(), size_t{0});
        EXPECT_EQ(sorted, every);  // a permutation
        std::vector<int64_t> next(static_cast<size_t>(ranks), 0);  // each rank's next completion
        for (int64_t row = 0; row < static_cast<int64_t>(order.size()); ++row) {
          const int rank = distributed::owner_of_micro_batch(row / batch, static_cast<int>(ranks));
          const auto completion = static_cast<int64_t>(order[static_cast<size_t>(row)]);
          EXPECT_EQ(completion / per_rank, rank) << "row " << row;  // rank r sampled [r·n, (r+1)·n)
          EXPECT_EQ(completion % per_rank, next[static_cast<size_t>(rank)]++) << "row " << row;
        }
        if (ranks == 1) EXPECT_EQ(order, every);
      }
    }
  }
}

TEST(GrpoWindowOrder, InWindowOrderTakesEachValueAtItsIndex) {
  const std::vector<double> values{10.0, 11.0, 12.0, 13.0};
  EXPECT_EQ(in_window_order(values, grpo_window_order(2, 2, 1)), (std::vector<double>{10.0, 12.0, 11.0, 13.0}));
  EXPECT_EQ(in_window_order(values, grpo_window_order(2, 1, 2)), values);
}

}  // namespace
}  // namespace surogate::train
