// The CPU ranks' communicator: gloo (Debian's libgloo-dev, the library PyTorch uses for CPU
// collectives) over its TCP transport. gloo needs a rendezvous store through which ranks swap
// addresses: connect_in_process_gloo uses gloo's in-process HashStore for a world of threads in
// this process (distributed/rank_threads.h), bound to the loopback interface; connect_gloo joins
// this process's rank threads to the ranks of the other processes of a world (launcher variables,
// Ray) through the world's TCP store (process_world.h), bound to the interface the others reach.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/process_world.h"
#include "distributed/rank_threads.h"

namespace surogate::distributed {

// One connected communicator per rank of `threads` (index = rank), each made on its rank's
// thread (gloo connects every pair at once). `timeout` bounds every collective: a rank that
// never arrives fails the others with a message instead of hanging them.
std::vector<std::unique_ptr<Communicator>> connect_in_process_gloo(
    RankThreads& threads, std::chrono::milliseconds timeout = std::chrono::minutes(10));

// This process's rank threads as the global ranks [first_rank, first_rank + threads.world_size())
// of a world of `world_size` ranks spread over `world`'s processes (every process calls it). With
// one process it is connect_in_process_gloo. The world's timeout bounds every collective.
std::vector<std::unique_ptr<Communicator>> connect_gloo(RankThreads& threads, ProcessWorld& world, int first_rank,
                                                        int world_size);

// A group of ranks with a communicator of its own (a sequence group, a pipeline stage's gradient
// group): its name (unique in the run, the rendezvous keys' prefix), this rank's index in it and
// its size. A group of one gets a communicator whose collectives return at once.
struct RankGroup {
  std::string name;
  int rank = 0;
  int size = 1;
};

// Each of this process's rank threads (global ranks first_rank + local) joined to the group
// `group_of(global rank)` names; every rank of a group must name it alike (every process calls it).
std::vector<std::unique_ptr<Communicator>> connect_gloo_groups(RankThreads& threads, ProcessWorld& world,
                                                               int first_rank,
                                                               const std::function<RankGroup(int)>& group_of);

}  // namespace surogate::distributed
