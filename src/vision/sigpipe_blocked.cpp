#include "vision/sigpipe_blocked.h"

#include <pthread.h>

#include <ctime>

namespace surogate::vision {
namespace {

bool sigpipe_pending() {
  sigset_t pending;
  sigemptyset(&pending);
  return sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

}  // namespace

SigpipeBlocked::SigpipeBlocked() {
  sigemptyset(&pipe_);
  sigaddset(&pipe_, SIGPIPE);
  was_pending_ = sigpipe_pending();
  blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &previous_) == 0;
}

SigpipeBlocked::~SigpipeBlocked() {
  if (!blocked_) return;
  if (!was_pending_ && sigpipe_pending()) {
    const timespec now{0, 0};
    sigtimedwait(&pipe_, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

}  // namespace surogate::vision
