// The processes of one run and the channel between them. A run is one process (`gpus: N` drives
// N rank threads) or a world of processes started by a launcher (launcher_environment.h; the Ray
// driver is one): each process drives the same number of rank threads, so process p holds the
// global ranks [p·L, (p + 1)·L) of a data-parallel world of P·L ranks (parallel_layout.h).
//
// connect() joins the world: rank 0 runs the rendezvous store (tcp_store.h) on MASTER_PORT, every
// process checks in (so a process that never starts is named after the timeout, and one that
// disagrees on WORLD_SIZE is an error at once), then a gloo context over TCP joins the processes:
// the control channel. It carries the host-side exchanges of the step loop and of checkpoints —
// small and per process, not per rank: the window's loss-token counts, the ranks' losses, the
// leader's resume state, optimizer-state shards to and from the leader, the NCCL unique id, and
// barriers. The ranks' own communicators (gloo for CPU ranks, NCCL for GPUs) are joined through
// the same store (connect_gloo in gloo_communicator.h) or with the id the channel broadcast.
//
// Every process calls the same exchanges in the same order. A peer that stopped closes its
// connections, which fails the exchange at once with a RankFailure naming it; one that hangs
// fails it after the timeout. A world of one process (single()) answers every exchange locally.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "distributed/launcher_environment.h"

namespace gloo::rendezvous {
class Store;
}

namespace surogate::distributed {

class ProcessWorld {
public:
  ~ProcessWorld();
  ProcessWorld(const ProcessWorld&) = delete;
  ProcessWorld& operator=(const ProcessWorld&) = delete;

  // This process alone (no launcher): every exchange is local.
  static std::unique_ptr<ProcessWorld> single();
  // Joins the world `spec` describes (blocks until every process has joined, or the timeout).
  static std::unique_ptr<ProcessWorld> connect(const ProcessWorldSpec& spec);

  int rank() const { return spec_.rank; }
  int size() const { return spec_.size; }
  int local_rank() const { return spec_.local_rank; }
  const ProcessWorldSpec& spec() const { return spec_; }
  bool leads() const { return spec_.rank == 0; }  // rank 0 writes logs, checkpoints and outputs
  bool alone() const { return spec_.size == 1; }
  std::chrono::milliseconds timeout() const { return spec_.timeout; }

  // Every process's `mine` (the same count everywhere), in process order.
  std::vector<double> all_gather(std::span<const double> mine);
  // The leader's `bytes` on every process (ignored elsewhere).
  std::string broadcast(const std::string& bytes);
  // The leader receives every process's `mine` in process order; the others get an empty list.
  std::vector<std::string> gather(const std::string& mine);
  // The leader gives `pieces[p]` to process p (pieces is ignored elsewhere); each gets its own.
  std::string scatter(const std::vector<std::string>& pieces);
  // Returns when every process has entered it; `timeout` replaces the world's (a leader that
  // writes a large checkpoint or tokenizes a dataset may keep the others waiting a long time).
  void barrier(std::chrono::milliseconds timeout);
  void barrier() { barrier(spec_.timeout); }
  // A count every process must agree on (e.g. its rank threads): a UserError naming `what` and
  // every process's value when they differ.
  void check_same(const std::string& what, int64_t value);

  // For joining the ranks' communicators: the rendezvous store (nullptr when alone) and the
  // local address the other machines reach this one by (gloo's transports bind there).
  gloo::rendezvous::Store* store();
  const std::string& transport_address() const { return transport_address_; }

private:
  struct Channel;
  explicit ProcessWorld(ProcessWorldSpec spec);

  ProcessWorldSpec spec_;
  std::string transport_address_ = "127.0.0.1";
  std::unique_ptr<Channel> channel_;
};

}  // namespace surogate::distributed
