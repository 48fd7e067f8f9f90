// See interrupt_cleanup.h. The handler may run on any thread at any moment, so it touches only
// lock-free atomics and fixed buffers, and calls only async-signal-safe functions (unlink,
// sigaction, raise).
#include "io/interrupt_cleanup.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace surogate::io {
namespace {

constexpr int kSlots = 64;
constexpr size_t kPathBytes = 4096;

// A slot's state: free, being filled (not yet readable by the handler), or holding a path.
enum SlotState : int { kFree = 0, kFilling = 1, kHeld = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  char path[kPathBytes];
};

Slot slots[kSlots];
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

void remove_registered_files(int signal_number) {
  for (Slot& slot : slots) {
    if (slot.state.load(std::memory_order_acquire) == kHeld) ::unlink(slot.path);
  }
  // Now end the process the way the signal would have.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  ::sigaction(signal_number, &fallback, nullptr);
  ::raise(signal_number);
}

void install_handler_once() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    for (int signal_number : kSignals) {
      struct sigaction current {};
      if (::sigaction(signal_number, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
      struct sigaction action {};
      action.sa_handler = remove_registered_files;
      sigemptyset(&action.sa_mask);
      for (int other : kSignals) sigaddset(&action.sa_mask, other);  // one cleanup at a time
      ::sigaction(signal_number, &action, nullptr);
    }
  });
}

}  // namespace

InterruptCleanup::InterruptCleanup(const std::filesystem::path& path) {
  const std::string text = path.string();
  if (text.size() >= kPathBytes) return;
  install_handler_once();
  for (int index = 0; index < kSlots; ++index) {
    int expected = kFree;
    if (!slots[index].state.compare_exchange_strong(expected, kFilling, std::memory_order_acq_rel)) continue;
    std::memcpy(slots[index].path, text.c_str(), text.size() + 1);
    slots[index].state.store(kHeld, std::memory_order_release);
    slot_ = index;
    return;
  }
}

InterruptCleanup::~InterruptCleanup() {
  if (slot_ >= 0) slots[slot_].state.store(kFree, std::memory_order_release);
}

}  // namespace surogate::io
