// The world of processes; see process_world.h. The control channel is one gloo context over TCP
// (one per process). Fixed-size exchanges use gloo's collectives; the variable-sized ones
// (gather to and scatter from the leader) first exchange sizes, then move bytes with gloo's
// point-to-point buffers, so only the leader ever holds every process's piece.
#include "distributed/process_world.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gloo/allgather.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <csignal>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/rank_failure.h"
#include "distributed/tcp_store.h"

namespace surogate::distributed {
namespace {

// gloo's slot of a point-to-point transfer: a prefix no gloo collective uses, and the tag.
uint64_t world_point_to_point_slot(uint32_t tag) { return (uint64_t{0x7e} << 56) | tag; }

std::string ipv4_text(const sockaddr_in& address) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof(text));
  return text;
}

// The address other machines reach this one by: the interface GLOO_SOCKET_IFNAME names, else the
// one the route to the master leaves from (a UDP "connect" sends nothing, it only picks a route).
std::string local_transport_address(const ProcessWorldSpec& spec) {
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface != nullptr && *interface != '\0') {
    ifaddrs* addresses = nullptr;
    std::string found;
    if (::getifaddrs(&addresses) == 0) {
      for (ifaddrs* entry = addresses; entry != nullptr; entry = entry->ifa_next) {
        if (entry->ifa_addr != nullptr && entry->ifa_addr->sa_family == AF_INET && interface == std::string(entry->ifa_name)) {
          found = ipv4_text(*reinterpret_cast<sockaddr_in*>(entry->ifa_addr));
          break;
        }
      }
      ::freeifaddrs(addresses);
    }
    if (found.empty()) fail_user("GLOO_SOCKET_IFNAME={} names no network interface with an IPv4 address here", interface);
    return found;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(spec.master_address.c_str(), std::to_string(spec.master_port).c_str(), &hints, &found) != 0) {
    fail_user("MASTER_ADDR={} does not resolve to an IPv4 address from this machine; give rank 0's host name or "
              "address", spec.master_address);
  }
  std::string address = "127.0.0.1";
  const int probe = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (probe >= 0 && ::connect(probe, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t length = sizeof(local);
    if (::getsockname(probe, reinterpret_cast<sockaddr*>(&local), &length) == 0) address = ipv4_text(local);
  }
  if (probe >= 0) ::close(probe);
  ::freeaddrinfo(found);
  return address;
}

}  // namespace

struct ProcessWorld::Channel {
  std::unique_ptr<TcpStoreServer> server;  // rank 0 only
  std::unique_ptr<TcpStoreClient> store;
  std::shared_ptr<gloo::Context> context;
  uint32_t tag = 0;

  // gloo reports a peer that closed its connections, or did not answer in time, as an exception.
  template <typename Body>
  void guarded(const ProcessWorldSpec& spec, const char* what, Body&& body) {
    try {
      body();
    } catch (const UserError&) {
      throw;
    } catch (const std::exception& error) {
      throw RankFailure(fmt::format("process {} of {}: the {} with the other processes failed ({}); another process "
                                    "of the run stopped or is stuck (its own output says why)",
                                    spec.rank, spec.size, what, error.what()));
    }
  }
};

ProcessWorld::ProcessWorld(ProcessWorldSpec spec) : spec_(std::move(spec)), channel_(std::make_unique<Channel>()) {}
ProcessWorld::~ProcessWorld() = default;

std::unique_ptr<ProcessWorld> ProcessWorld::single() { return std::unique_ptr<ProcessWorld>(new ProcessWorld({})); }

std::unique_ptr<ProcessWorld> ProcessWorld::connect(const ProcessWorldSpec& spec) {
  std::unique_ptr<ProcessWorld> world(new ProcessWorld(spec));
  if (spec.size == 1) return world;
  // gloo writes to its peers with writev, which raises SIGPIPE when a peer has gone; ignored (as
  // Python does for PyTorch), the write fails instead and the collective reports the peer.
  std::signal(SIGPIPE, SIG_IGN);
  Channel& channel = *world->channel_;
  if (spec.rank == 0) channel.server = std::make_unique<TcpStoreServer>(spec.master_address, spec.master_port);
  channel.store = std::make_unique<TcpStoreClient>(spec.master_address, spec.master_port, spec.timeout);

  // Check in: every process says how many processes it was told to expect.
  channel.store->set(fmt::format("joined/{}", spec.rank), std::vector<char>(reinterpret_cast<const char*>(&spec.size),
                                                                           reinterpret_cast<const char*>(&spec.size) + sizeof(int)));
  std::vector<std::string> keys;
  for (int rank = 0; rank < spec.size; ++rank) keys.push_back(fmt::format("joined/{}", rank));
  try {
    channel.store->wait(keys, spec.timeout);
  } catch (const RendezvousTimeout& timeout) {
    std::vector<std::string> ranks;
    for (const std::string& key : timeout.missing_keys) ranks.push_back(key.substr(key.find('/') + 1));
    fail_user("process {} of {}: process(es) {} did not join the run at {}:{} within {} s ({}); start every rank "
              "of the run, or check the launcher's output for the one that failed (SUROGATE_DISTRIBUTED_TIMEOUT sets "
              "the wait, in seconds)", spec.rank, spec.size, fmt::join(ranks, ", "), spec.master_address,
              spec.master_port, std::chrono::duration_cast<std::chrono::seconds>(spec.timeout).count(), spec.source);
  }
  for (int rank = 0; rank < spec.size; ++rank) {
    const std::vector<char> told = channel.store->get(keys[static_cast<size_t>(rank)]);
    int size = 0;
    std::memcpy(&size, told.data(), std::min(told.size(), sizeof(int)));
    if (size != spec.size) {
      fail_user("process {} was started for a world of {} processes, but this one (rank {}) for {}: every process "
                "of a run needs the same WORLD_SIZE", rank, size, spec.rank, spec.size);
    }
  }

  world->transport_address_ = local_transport_address(spec);
  gloo::transport::tcp::attr attributes(world->transport_address_.c_str());
  auto device = gloo::transport::tcp::CreateDevice(attributes);
  auto context = std::make_shared<gloo::rendezvous::Context>(spec.rank, spec.size);
  context->setTimeout(spec.timeout);
  gloo::rendezvous::PrefixStore prefixed("control", *channel.store);
  channel.guarded(spec, "connection", [&] { context->connectFullMesh(prefixed, device); });
  channel.context = std::move(context);
  return world;
}

gloo::rendezvous::Store* ProcessWorld::store() { return channel_->store.get(); }

std::vector<double> ProcessWorld::all_gather(std::span<const double> mine) {
  if (alone() || mine.empty()) return std::vector<double>(mine.begin(), mine.end());
  std::vector<double> every(mine.size() * static_cast<size_t>(size()));
  channel_->guarded(spec_, "exchange of step totals", [&] {
    gloo::AllgatherOptions options(channel_->context);
    options.setInput(const_cast<double*>(mine.data()), mine.size());
    options.setOutput(every.data(), every.size());
    options.setTag(channel_->tag++);
    gloo::allgather(options);
  });
  return every;
}

std::string ProcessWorld::broadcast(const std::string& bytes) {
  if (alone()) return bytes;
  uint64_t count = leads() ? bytes.size() : 0;
  std::string received = leads() ? bytes : std::string();
  channel_->guarded(spec_, "broadcast from rank 0", [&] {
    gloo::BroadcastOptions sizes(channel_->context);
    sizes.setOutput(&count, 1);
    sizes.setRoot(0);
    sizes.setTag(channel_->tag++);
    gloo::broadcast(sizes);
    received.resize(count);
    if (count == 0) return;
    gloo::BroadcastOptions data(channel_->context);
    data.setOutput(reinterpret_cast<uint8_t*>(received.data()), count);
    data.setRoot(0);
    data.setTag(channel_->tag++);
    gloo::broadcast(data);
  });
  return received;
}

std::vector<std::string> ProcessWorld::gather(const std::string& mine) {
  if (alone()) return {mine};
  const double own = static_cast<double>(mine.size());
  const std::vector<double> sizes = all_gather(std::span<const double>(&own, 1));
  std::vector<std::string> pieces;
  const uint32_t tag = channel_->tag++;
  channel_->guarded(spec_, "gather to rank 0", [&] {
    if (!leads()) {
      if (mine.empty()) return;
      auto buffer = channel_->context->createUnboundBuffer(const_cast<char*>(mine.data()), mine.size());
      buffer->send(0, world_point_to_point_slot(tag));
      buffer->waitSend(spec_.timeout);
      return;
    }
    pieces.resize(static_cast<size_t>(size()));
    pieces[0] = mine;
    for (int process = 1; process < size(); ++process) {
      std::string& piece = pieces[static_cast<size_t>(process)];
      piece.resize(static_cast<size_t>(sizes[static_cast<size_t>(process)]));
      if (piece.empty()) continue;
      auto buffer = channel_->context->createUnboundBuffer(piece.data(), piece.size());
      buffer->recv(process, world_point_to_point_slot(tag));
      buffer->waitRecv(spec_.timeout);
    }
  });
  return pieces;
}

std::string ProcessWorld::scatter(const std::vector<std::string>& pieces) {
  if (alone()) return pieces.empty() ? std::string() : pieces[0];
  std::string sizes_text;
  if (leads()) {
    SUROGATE_CHECK(pieces.size() == static_cast<size_t>(size()), "one piece per process");
    for (const std::string& piece : pieces) sizes_text += fmt::format("{} ", piece.size());
  }
  sizes_text = broadcast(sizes_text);
  std::vector<size_t> sizes;
  for (size_t start = 0; start < sizes_text.size();) {
    const size_t end = sizes_text.find(' ', start);
    sizes.push_back(std::stoull(sizes_text.substr(start, end - start)));
    start = end + 1;
  }
  std::string own;
  const uint32_t tag = channel_->tag++;
  channel_->guarded(spec_, "scatter from rank 0", [&] {
    if (leads()) {
      own = pieces[0];
      for (int process = 1; process < size(); ++process) {
        const std::string& piece = pieces[static_cast<size_t>(process)];
        if (piece.empty()) continue;
        auto buffer = channel_->context->createUnboundBuffer(const_cast<char*>(piece.data()), piece.size());
        buffer->send(process, world_point_to_point_slot(tag));
        buffer->waitSend(spec_.timeout);
      }
      return;
    }
    own.resize(sizes[static_cast<size_t>(rank())]);
    if (own.empty()) return;
    auto buffer = channel_->context->createUnboundBuffer(own.data(), own.size());
    buffer->recv(0, world_point_to_point_slot(tag));
    buffer->waitRecv(spec_.timeout);
  });
  return own;
}

void ProcessWorld::barrier(std::chrono::milliseconds timeout) {
  if (alone()) return;
  channel_->guarded(spec_, "barrier", [&] {
    gloo::BarrierOptions options(channel_->context);
    options.setTag(channel_->tag++);
    options.setTimeout(timeout);
    gloo::barrier(options);
  });
}

void ProcessWorld::check_same(const std::string& what, int64_t value) {
  if (alone()) return;
  const double own = static_cast<double>(value);
  const std::vector<double> every = all_gather(std::span<const double>(&own, 1));
  for (double other : every) {
    if (other != own) {
      std::vector<std::string> listed;
      for (size_t process = 0; process < every.size(); ++process) {
        listed.push_back(fmt::format("process {}: {}", process, static_cast<int64_t>(every[process])));
      }
      fail_user("the processes of the run disagree on {} ({}); start every process with the same configuration",
                what, fmt::join(listed, ", "));
    }
  }
}

}  // namespace surogate::distributed
