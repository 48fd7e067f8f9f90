// SIGPIPE blocked on the calling thread for a scope. OpenSSL (https downloads) writes to its socket
// with write(), which raises SIGPIPE when the server has already closed the connection; left
// alone the signal ends the process without a message. Blocked, the write fails with EPIPE, the
// download becomes an ordinary error naming the URL, and the signal the write left pending on this
// thread is consumed before the previous mask comes back.
#pragma once

#include <csignal>

namespace surogate::vision {

class SigpipeBlocked {
public:
  SigpipeBlocked();
  ~SigpipeBlocked();
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

private:
  sigset_t pipe_{};
  sigset_t previous_{};
  bool was_pending_ = false;  // one from before the scope is left to the previous mask
  bool blocked_ = false;
};

}  // namespace surogate::vision
