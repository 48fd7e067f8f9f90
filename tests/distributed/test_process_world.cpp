// A world of processes, with each "process" a thread of this test joining through the real TCP
// rendezvous on the loopback interface: the store's set / get / wait and its timeout; joining
// (a process that never comes is named, one told another WORLD_SIZE is refused); the control
// channel's exchanges (all-gather, broadcast, gather to and scatter from rank 0, barrier,
// check_same); and gloo communicators of 2 processes × 2 rank threads whose all-reduce and
// all-gather equal serial computations (small integers: exact in any order).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "distributed/gloo_communicator.h"
#include "distributed/process_world.h"
#include "distributed/rank_failure.h"
#include "distributed/tcp_store.h"

namespace surogate::distributed {
namespace {

// A port nothing listens on now (the kernel's pick; another program could take it meanwhile).
int free_port() {
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(probe);
  return ntohs(address.sin_port);
}

ProcessWorldSpec spec_of(int rank, int size, int port, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  ProcessWorldSpec spec;
  spec.rank = rank;
  spec.size = size;
  spec.master_address = "127.0.0.1";
  spec.master_port = port;
  spec.timeout = timeout;
  spec.source = "test";
  return spec;
}

// Runs body(rank) for every process on its own thread; returns each one's error message ("" if none).
std::vector<std::string> run_processes(int size, const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (const std::exception& error) {
        errors[static_cast<size_t>(rank)] = error.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return errors;
}

TEST(TcpStore, SetGetWaitAndTimeout) {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStoreClient first("127.0.0.1", server.port(), std::chrono::seconds(5));
  TcpStoreClient second("localhost", server.port(), std::chrono::seconds(5));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    first.set("key", {'a', '\0', 'b'});
  });
  EXPECT_EQ(second.get("key"), (std::vector<char>{'a', '\0', 'b'}));  // waits for the set
  later.join();
  EXPECT_EQ(second.missing({"key", "absent"}), std::vector<std::string>{"absent"});
  try {
    second.wait({"key", "absent"}, std::chrono::milliseconds(200));
    FAIL() << "no timeout";
  } catch (const RendezvousTimeout& timeout) {
    EXPECT_EQ(timeout.missing_keys, std::vector<std::string>{"absent"});
    EXPECT_NE(std::string(timeout.what()).find("absent"), std::string::npos);
  }
}

TEST(TcpStore, NoServerAndAPortInUseAreClearErrors) {
  const int port = free_port();
  try {
    TcpStoreClient client("127.0.0.1", port, std::chrono::milliseconds(300));
    FAIL() << "connected to nothing";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("could not reach rank 0's rendezvous at 127.0.0.1:"), std::string::npos);
  }
  TcpStoreServer server("127.0.0.1", 0);
  try {
    TcpStoreServer again("127.0.0.1", server.port());
    FAIL() << "two servers on one port";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("MASTER_PORT"), std::string::npos);
  }
}

TEST(ProcessWorld, TheControlChannelsExchanges) {
  const int size = 3, port = free_port();
  std::vector<std::vector<double>> gathered(size);
  std::vector<std::string> broadcast(size), scattered(size);
  std::vector<std::vector<std::string>> gathered_text(size);
  const std::vector<std::string> errors = run_processes(size, [&](int rank) {
    std::unique_ptr<ProcessWorld> world = ProcessWorld::connect(spec_of(rank, size, port));
    EXPECT_EQ(world->leads(), rank == 0);
    const std::vector<double> mine = {rank + 0.5, -static_cast<double>(rank)};
    gathered[rank] = world->all_gather(mine);
    broadcast[rank] = world->broadcast(rank == 0 ? std::string("from rank 0\0!", 13) : std::string("ignored"));
    gathered_text[rank] = world->gather(std::string(static_cast<size_t>(rank) * 1000, static_cast<char>('a' + rank)));
    std::vector<std::string> pieces;
    if (rank == 0) pieces = {"zero", "", std::string(100000, 'x')};
    scattered[rank] = world->scatter(pieces);
    world->barrier();
    world->check_same("a count", 7);
  });
  for (int rank = 0; rank < size; ++rank) {
    EXPECT_EQ(errors[rank], "") << "process " << rank;
    EXPECT_EQ(gathered[rank], (std::vector<double>{0.5, 0.0, 1.5, -1.0, 2.5, -2.0}));
    EXPECT_EQ(broadcast[rank], std::string("from rank 0\0!", 13));
    EXPECT_EQ(gathered_text[rank].size(), rank == 0 ? 3u : 0u);
  }
  EXPECT_EQ(gathered_text[0][0], "");
  EXPECT_EQ(gathered_text[0][1], std::string(1000, 'b'));
  EXPECT_EQ(gathered_text[0][2], std::string(2000, 'c'));
  EXPECT_EQ(scattered, (std::vector<std::string>{"zero", "", std::string(100000, 'x')}));
}

TEST(ProcessWorld, DisagreementsAreNamed) {
  const int port = free_port();
  const std::vector<std::string> errors = run_processes(2, [&](int rank) {
    std::unique_ptr<ProcessWorld> world = ProcessWorld::connect(spec_of(rank, 2, port));
    world->check_same("the rank threads", rank + 1);
  });
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("the processes of the run disagree on the rank threads (process 0: 1, process 1: 2)"),
              std::string::npos) << error;
  }
  // Process 1 was told of a world of 3: process 0 refuses at once, and process 1, waiting for a
  // third, learns that rank 0 (whose store it waits at) stopped.
  const int other_port = free_port();
  const std::vector<std::string> told = run_processes(2, [&](int rank) {
    ProcessWorld::connect(spec_of(rank, rank == 0 ? 2 : 3, other_port, std::chrono::seconds(2)));
  });
  EXPECT_NE(told[0].find("process 1 was started for a world of 3 processes, but this one (rank 0) for 2"),
            std::string::npos) << told[0];
  EXPECT_NE(told[1].find("rank 0 stopped"), std::string::npos) << told[1];
}

TEST(ProcessWorld, AProcessThatNeverComesIsNamedAfterTheTimeout) {
  const int port = free_port();
  try {
    ProcessWorld::connect(spec_of(0, 3, port, std::chrono::milliseconds(500)));
    FAIL() << "joined without the others";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("process(es) 1, 2 did not join the run"), std::string::npos) << error.what();
  }
}

TEST(ProcessWorld, AProcessThatStopsFailsTheOthersAtOnce) {
  const int port = free_port();
  const std::vector<std::string> errors = run_processes(2, [&](int rank) {
    std::unique_ptr<ProcessWorld> world = ProcessWorld::connect(spec_of(rank, 2, port, std::chrono::seconds(60)));
    world->barrier();
    if (rank == 1) return;  // its world (and connections) close here
    const auto start = std::chrono::steady_clock::now();
    try {
      world->barrier();
    } catch (const RankFailure&) {
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << "not the timeout";
      throw;
    }
  });
  EXPECT_NE(errors[0].find("process 0 of 2: the barrier with the other processes failed"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[1], "");
}

TEST(ProcessWorld, GlooRanksOfTwoProcessesWithTwoThreadsEach) {
  const int processes = 2, local = 2, world_size = processes * local, port = free_port();
  const size_t count = 1001;
  std::vector<std::vector<float>> summed(world_size), gathered(world_size);
  const std::vector<size_t> pieces = {300, 0, 500, 201};
  const std::vector<std::string> errors = run_processes(processes, [&](int process) {
    std::unique_ptr<ProcessWorld> world = ProcessWorld::connect(spec_of(process, processes, port));
    RankThreads threads(local);
    std::vector<std::unique_ptr<Communicator>> communicators = connect_gloo(threads, *world, process * local, world_size);
    threads.run([&](int l) {
      const int rank = process * local + l;
      EXPECT_EQ(communicators[l]->rank(), rank);
      EXPECT_EQ(communicators[l]->world_size(), world_size);
      std::vector<float>& data = summed[rank];
      for (size_t i = 0; i < count; ++i) data.push_back(static_cast<float>((i * 3 + rank * 5) % 17) - 8.0f);
      communicators[l]->all_reduce_sum(data.data(), count, DType::F32);
      std::vector<float>& pieces_data = gathered[rank];
      pieces_data.assign(count, -1.0f);
      size_t offset = 0;
      for (int r = 0; r < rank; ++r) offset += pieces[r];
      for (size_t i = 0; i < pieces[rank]; ++i) pieces_data[offset + i] = static_cast<float>(rank * 1000 + i);
      communicators[l]->all_gather(pieces_data.data(), pieces, DType::F32);
    });
  });
  for (const std::string& error : errors) EXPECT_EQ(error, "");
  for (int rank = 0; rank < world_size; ++rank) {
    for (size_t i = 0; i < count; ++i) {
      float expected = 0.0f;
      for (int r = 0; r < world_size; ++r) expected += static_cast<float>((i * 3 + r * 5) % 17) - 8.0f;
      ASSERT_EQ(summed[rank][i], expected) << "rank " << rank << " element " << i;
    }
    size_t offset = 0;
    for (int owner = 0; owner < world_size; ++owner) {
      for (size_t i = 0; i < pieces[owner]; ++i) ASSERT_EQ(gathered[rank][offset + i], static_cast<float>(owner * 1000 + i));
      offset += pieces[owner];
    }
  }
}

}  // namespace
}  // namespace surogate::distributed
