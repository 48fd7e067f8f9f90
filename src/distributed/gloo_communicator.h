// The CPU ranks' communicator: gloo (Debian's libgloo-dev, the library PyTorch uses for CPU
// collectives) over its TCP transport. gloo needs a rendezvous store through which ranks swap
// addresses; connect_in_process_gloo uses gloo's in-process HashStore for a world of threads in
// this process (distributed/rank_threads.h), bound to the loopback interface. A world of
// processes (launcher variables, Ray) will use a file or TCP store instead, the rest unchanged.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/rank_threads.h"

namespace surogate::distributed {

// One connected communicator per rank of `threads` (index = rank), each made on its rank's
// thread (gloo connects every pair at once). `timeout` bounds every collective: a rank that
// never arrives fails the others with a message instead of hanging them.
std::vector<std::unique_ptr<Communicator>> connect_in_process_gloo(
    RankThreads& threads, std::chrono::milliseconds timeout = std::chrono::minutes(10));

}  // namespace surogate::distributed
