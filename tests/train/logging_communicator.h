// A communicator for tests of the algorithms written once over distributed::Communicator (the
// bucket reduction, ZeRO-1's publish): it moves no data, and every call a test does not expect
// logs "unexpected" into the test's log; a test overrides the collectives it checks.
#pragma once

#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace surogate::train {

class LoggingCommunicator : public distributed::Communicator {
public:
  LoggingCommunicator(std::vector<std::string>& log, int world_size) : log_(log), world_size_(world_size) {}
  std::string_view name() const override { return "logging"; }
  int rank() const override { return 1; }
  int world_size() const override { return world_size_; }
  void all_reduce_sum(void*, size_t, DType) override { unexpected(); }
  void all_reduce_amax(float*, size_t) override { unexpected(); }
  void reduce_scatter_sum(void*, std::span<const size_t>, DType) override { unexpected(); }
  void all_gather(void*, std::span<const size_t>, DType) override { unexpected(); }
  void broadcast(void*, size_t, DType, int) override { unexpected(); }
  void barrier() override { unexpected(); }
  void all_to_all(const void*, void*, size_t, DType) override { unexpected(); }
  void send(const void*, size_t, DType, int, uint32_t) override { unexpected(); }
  void receive(void*, size_t, DType, int, uint32_t) override { unexpected(); }
  void wait_sends() override {}

protected:
  void log(std::string line) { log_.push_back(std::move(line)); }

private:
  void unexpected() { log_.push_back("unexpected"); }
  std::vector<std::string>& log_;
  int world_size_;
};

}  // namespace surogate::train
