// A world of GetParam() rank threads joined by in-process gloo communicators, for the tests of the
// collectives and of the pieces built on them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "distributed/gloo_communicator.h"
#include "distributed/rank_threads.h"

namespace surogate::distributed {

class GlooWorld : public ::testing::TestWithParam<int> {
protected:
  void SetUp() override {
    threads_ = std::make_unique<RankThreads>(GetParam());
    communicators_ = connect_in_process_gloo(*threads_, std::chrono::seconds(60));
  }
  int world() const { return GetParam(); }
  std::unique_ptr<RankThreads> threads_;
  std::vector<std::unique_ptr<Communicator>> communicators_;
};

}  // namespace surogate::distributed
