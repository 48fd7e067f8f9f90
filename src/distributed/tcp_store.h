// The rendezvous of a world of processes: a small TCP key-value store, as torchrun's TCPStore.
// Rank 0 runs the server on MASTER_PORT; every process (rank 0 too) is a client. gloo's
// rendezvous needs exactly this (each rank publishes its transport address under a key and reads
// the others'), and Debian's gloo has no TCP store (only file, hash and Redis stores), so the
// store is here, implementing gloo's rendezvous::Store interface.
//
// It is used only while processes connect (gloo contexts, the NCCL unique id rides the control
// channel after that), so it is simple: the server answers every request at once (set, get if
// present, has), and a client waits for keys by asking again every few milliseconds, with a
// deadline. One client may serve several threads (each request holds the connection briefly),
// which is what lets a process's rank threads rendezvous through one connection.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "core/error.h"

namespace surogate::distributed {

class TcpStoreServer {
public:
  // Listens on `port` of every interface (of the loopback interface only when `address` is a
  // loopback address). Port 0 picks a free one (port() says which). A port in use is a UserError
  // naming MASTER_PORT.
  TcpStoreServer(const std::string& address, int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const;

private:
  struct State;
  std::unique_ptr<State> state_;
};

class TcpStoreClient final : public gloo::rendezvous::Store {
public:
  // Connects to address:port, retrying until `timeout` (rank 0 may start its server later than
  // the others start). Not reaching it in time is a UserError naming the address.
  TcpStoreClient(const std::string& address, int port, std::chrono::milliseconds timeout);
  ~TcpStoreClient() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;  // waits for the key (up to the timeout)
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  // The keys of `keys` not set yet (one request).
  std::vector<std::string> missing(const std::vector<std::string>& keys);

private:
  std::vector<char> request(char operation, const std::string& key, const std::vector<char>& value);

  std::string where_;  // "host:port", for messages
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  int socket_ = -1;
};

// Keys that did not appear in time (a process did not start, or stopped before it published
// them): a UserError whose message names the store, and the keys for callers that say more.
class RendezvousTimeout : public UserError {
public:
  RendezvousTimeout(const std::string& message, std::vector<std::string> keys)
      : UserError(message), missing_keys(std::move(keys)) {}
  std::vector<std::string> missing_keys;
};

}  // namespace surogate::distributed
