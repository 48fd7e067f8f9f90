// The rendezvous store; see tcp_store.h. A request is one byte of operation, the key (u32 length,
// bytes) and the value (u64 length, bytes); the answer is one status byte, then for a found key
// its value (u64 length, bytes). Operations: 'S' set, 'G' get (status 0: not set yet), 'H' has.
// The server has a thread per connection (a run has one connection per process).
#include "distributed/tcp_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/rank_failure.h"

namespace surogate::distributed {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(5);

// False when the peer closed the connection (or it broke).
bool send_all(int socket, const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t sent = ::send(socket, bytes, size, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    bytes += sent;
    size -= static_cast<size_t>(sent);
  }
  return true;
}

bool receive_all(int socket, void* data, size_t size) {
  char* bytes = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t received = ::recv(socket, bytes, size, 0);
    if (received < 0 && errno == EINTR) continue;
    if (received <= 0) return false;
    bytes += received;
    size -= static_cast<size_t>(received);
  }
  return true;
}

template <typename Integer>
bool receive_integer(int socket, Integer& value) {
  return receive_all(socket, &value, sizeof(value));
}

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.starts_with("127.") || address == "::1";
}

}  // namespace

// ---- server -------------------------------------------------------------------------------

struct TcpStoreServer::State {
  int listener = -1;
  int port = 0;
  std::atomic<bool> stopping{false};
  std::mutex mutex;
  std::map<std::string, std::vector<char>> values;
  std::vector<int> connections;
  std::vector<std::thread> threads;
  std::thread acceptor;

  void accept_loop() {
    while (!stopping) {
      pollfd waiting{listener, POLLIN, 0};
      if (::poll(&waiting, 1, 100) <= 0) continue;
      const int connection = ::accept(listener, nullptr, nullptr);
      if (connection < 0) continue;
      const int yes = 1;
      ::setsockopt(connection, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      std::lock_guard lock(mutex);
      if (stopping) {
        ::close(connection);
        return;
      }
      connections.push_back(connection);
      threads.emplace_back([this, connection] { serve(connection); });
    }
  }

  void serve(int connection) {
    for (;;) {
      char operation = 0;
      uint32_t key_size = 0;
      uint64_t value_size = 0;
      if (!receive_integer(connection, operation) || !receive_integer(connection, key_size)) return;
      std::string key(key_size, '\0');
      if (!receive_all(connection, key.data(), key_size) || !receive_integer(connection, value_size)) return;
      std::vector<char> value(value_size);
      if (!receive_all(connection, value.data(), value_size)) return;
      std::vector<char> answer(1, 0);
      {
        std::lock_guard lock(mutex);
        if (operation == 'S') {
          values[key] = std::move(value);
          answer[0] = 1;
        } else if (auto found = values.find(key); found != values.end()) {
          answer[0] = 1;
          if (operation == 'G') {
            const uint64_t size = found->second.size();
            answer.insert(answer.end(), reinterpret_cast<const char*>(&size), reinterpret_cast<const char*>(&size) + 8);
            answer.insert(answer.end(), found->second.begin(), found->second.end());
          }
        }
      }
      if (!send_all(connection, answer.data(), answer.size())) return;
    }
  }
};

TcpStoreServer::TcpStoreServer(const std::string& address, int port) : state_(std::make_unique<State>()) {
  state_->listener = ::socket(AF_INET, SOCK_STREAM, 0);
  if (state_->listener < 0) fail_user("cannot open a socket for the rendezvous store: {}", std::strerror(errno));
  const int yes = 1;
  ::setsockopt(state_->listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  sockaddr_in bound{};
  bound.sin_family = AF_INET;
  bound.sin_port = htons(static_cast<uint16_t>(port));
  bound.sin_addr.s_addr = htonl(is_loopback(address) ? INADDR_LOOPBACK : INADDR_ANY);
  if (::bind(state_->listener, reinterpret_cast<sockaddr*>(&bound), sizeof(bound)) != 0 ||
      ::listen(state_->listener, 128) != 0) {
    const std::string reason = std::strerror(errno);
    ::close(state_->listener);
    fail_user("rank 0 cannot listen on port {} for the other processes (MASTER_PORT={}): {}; choose a free port "
              "(another run may be using this one)", port, port, reason);
  }
  socklen_t length = sizeof(bound);
  ::getsockname(state_->listener, reinterpret_cast<sockaddr*>(&bound), &length);
  state_->port = ntohs(bound.sin_port);
  state_->acceptor = std::thread([state = state_.get()] { state->accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  state_->stopping = true;
  state_->acceptor.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(state_->mutex);
    for (int connection : state_->connections) ::shutdown(connection, SHUT_RDWR);
    threads = std::move(state_->threads);
  }
  for (std::thread& thread : threads) thread.join();
  for (int connection : state_->connections) ::close(connection);
  ::close(state_->listener);
}

int TcpStoreServer::port() const { return state_->port; }

// ---- client -------------------------------------------------------------------------------

TcpStoreClient::TcpStoreClient(const std::string& address, int port, std::chrono::milliseconds timeout)
    : where_(fmt::format("{}:{}", address, port)), timeout_(timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const Clock::time_point deadline = Clock::now() + timeout;
  std::string last_problem = "no answer";
  while (socket_ < 0) {
    addrinfo* found = nullptr;
    const int status = ::getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (status != 0) {
      last_problem = ::gai_strerror(status);
    } else {
      for (addrinfo* candidate = found; candidate != nullptr && socket_ < 0; candidate = candidate->ai_next) {
        const int attempt = ::socket(candidate->ai_family, candidate->ai_socktype, candidate->ai_protocol);
        if (attempt < 0) continue;
        if (::connect(attempt, candidate->ai_addr, candidate->ai_addrlen) == 0) {
          socket_ = attempt;
        } else {
          last_problem = std::strerror(errno);
          ::close(attempt);
        }
      }
      ::freeaddrinfo(found);
    }
    if (socket_ >= 0) break;
    if (Clock::now() >= deadline) {
      fail_user("could not reach rank 0's rendezvous at {} (MASTER_ADDR:MASTER_PORT) within {} s: {}. Check that "
                "rank 0 is running, that MASTER_ADDR names its machine as this one can reach it, and that the port "
                "is not blocked", where_, std::chrono::duration_cast<std::chrono::seconds>(timeout).count(),
                last_problem);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const int yes = 1;
  ::setsockopt(socket_, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
}

TcpStoreClient::~TcpStoreClient() {
  if (socket_ >= 0) ::close(socket_);
}

std::vector<char> TcpStoreClient::request(char operation, const std::string& key, const std::vector<char>& value) {
  std::lock_guard lock(mutex_);
  const uint32_t key_size = static_cast<uint32_t>(key.size());
  const uint64_t value_size = value.size();
  std::vector<char> frame;
  frame.push_back(operation);
  frame.insert(frame.end(), reinterpret_cast<const char*>(&key_size), reinterpret_cast<const char*>(&key_size) + 4);
  frame.insert(frame.end(), key.begin(), key.end());
  frame.insert(frame.end(), reinterpret_cast<const char*>(&value_size), reinterpret_cast<const char*>(&value_size) + 8);
  frame.insert(frame.end(), value.begin(), value.end());
  char status = 0;
  bool ok = send_all(socket_, frame.data(), frame.size()) && receive_integer(socket_, status);
  std::vector<char> answer(1, status);
  if (ok && status == 1 && operation == 'G') {
    uint64_t size = 0;
    ok = receive_integer(socket_, size);
    answer.resize(1 + size);
    ok = ok && receive_all(socket_, answer.data() + 1, size);
  }
  if (!ok) {
    throw RankFailure(fmt::format("the connection to rank 0's rendezvous at {} broke: rank 0 stopped (its own output "
                                  "says why)", where_));
  }
  return answer;
}

void TcpStoreClient::set(const std::string& key, const std::vector<char>& data) { request('S', key, data); }

std::vector<char> TcpStoreClient::get(const std::string& key) {
  wait({key}, timeout_);
  std::vector<char> answer = request('G', key, {});
  return std::vector<char>(answer.begin() + 1, answer.end());
}

std::vector<std::string> TcpStoreClient::missing(const std::vector<std::string>& keys) {
  std::vector<std::string> absent;
  for (const std::string& key : keys) {
    if (request('H', key, {})[0] != 1) absent.push_back(key);
  }
  return absent;
}

void TcpStoreClient::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TcpStoreClient::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::vector<std::string> absent = keys;
  for (;;) {
    absent = missing(absent);
    if (absent.empty()) return;
    if (Clock::now() >= deadline) {
      throw RendezvousTimeout(
          fmt::format("waited {} s at the rendezvous ({}) for {}; a process of the run did not start, or stopped "
                      "before it got there (its own output says why)",
                      std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), where_,
                      fmt::join(absent, ", ")),
          absent);
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace surogate::distributed
