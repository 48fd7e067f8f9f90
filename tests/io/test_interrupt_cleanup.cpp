// A file written through a temporary (io/atomic_file.h) leaves nothing behind when the process
// is interrupted mid-write: Ctrl-C during `surogate tokenize` used to leave a 58 MB .tmp file.
// Each case runs in a child process (a gtest death test) that raises the signal on itself while
// the temporary file is open; the parent checks how it died and what is left in the folder.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <string>

#include "io/atomic_file.h"
#include "io/interrupt_cleanup.h"
#include "io_test_helpers.h"

namespace surogate::io {
namespace {

std::vector<std::string> folder_entries(const std::filesystem::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) names.push_back(entry.path().filename());
  return names;
}

void write_then_interrupt(const std::filesystem::path& target, int signal_number) {
  write_file_atomically(target, [&](const ByteSink& sink) {
    const std::string block(1 << 20, 'x');
    sink(block.data(), block.size());
    ::raise(signal_number);
  });
}

class InterruptCleanupTest : public ::testing::TestWithParam<int> {};

TEST_P(InterruptCleanupTest, AnInterruptedWriteLeavesNoTemporaryFile) {
  testing::TemporaryFolder folder;
  const std::filesystem::path target = folder.path() / "dataset.surotok";
  EXPECT_EXIT(write_then_interrupt(target, GetParam()), ::testing::KilledBySignal(GetParam()), "");
  EXPECT_TRUE(folder_entries(folder.path()).empty()) << "left: " << ::testing::PrintToString(folder_entries(folder.path()));
}

INSTANTIATE_TEST_SUITE_P(Signals, InterruptCleanupTest, ::testing::Values(SIGINT, SIGTERM, SIGHUP));

TEST(InterruptCleanup, AProgramsOwnHandlerIsKept) {
  testing::TemporaryFolder folder;
  const std::filesystem::path target = folder.path() / "kept.bin";
  // The child handles SIGINT itself (as the restart supervisor does): the signal does not end
  // the write, so the file is completed and nothing else is removed.
  EXPECT_EXIT(
      {
        struct sigaction ignore {};
        ignore.sa_handler = [](int) {};
        sigemptyset(&ignore.sa_mask);
        ::sigaction(SIGINT, &ignore, nullptr);
        write_then_interrupt(target, SIGINT);
        std::exit(std::filesystem::exists(target) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(InterruptCleanup, ARegistrationEndsWithItsScope) {
  testing::TemporaryFolder folder;
  const std::filesystem::path kept = folder.path() / "kept", removed = folder.path() / "removed";
  EXPECT_EXIT(
      {
        std::ofstream(kept) << "a";
        std::ofstream(removed) << "b";
        { InterruptCleanup released(kept); }
        InterruptCleanup held(removed);
        ::raise(SIGTERM);
      },
      ::testing::KilledBySignal(SIGTERM), "");
  EXPECT_TRUE(std::filesystem::exists(kept));
  EXPECT_FALSE(std::filesystem::exists(removed));
}

}  // namespace
}  // namespace surogate::io
