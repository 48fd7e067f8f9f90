// The restarting supervisor; see restart_supervisor.h.
#include "train/supervise/restart_supervisor.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/checkpoint_store.h"
#include "train/observe/metrics_log.h"

extern char** environ;

namespace surogate::train {
namespace {

constexpr const char* kAttemptVariable = "SUROGATE_RESTART_ATTEMPT";
constexpr const char* kRestartsVariable = "SUROGATE_RESTARTS";
constexpr int kExitUserError = 2;

// A signal handler can only reach the child through process-wide state: the one child running
// and the signal that asked the supervisor to stop.
volatile sig_atomic_t running_child = 0;
volatile sig_atomic_t stop_signal = 0;

void pass_to_child(int signal) {
  stop_signal = signal;
  if (running_child > 0) ::kill(static_cast<pid_t>(running_child), signal);
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), ::strsignal(WTERMSIG(status)));
  }
  const int code = WEXITSTATUS(status);
  if (code == 1) return "exit code 1 (internal or CUDA error)";
  if (code == 3) return "exit code 3 (training diverged: too many non-finite steps in a row)";
  return fmt::format("exit code {}", code);
}

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

// Starts this program with `arguments` and the given extra environment; returns the child's pid.
pid_t start_child(const std::vector<std::string>& arguments, const std::vector<std::string>& variables) {
  // Everything the child needs is built before fork(): between fork and exec only system calls.
  std::vector<std::string> environment_text;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    if (text.starts_with(std::string(kAttemptVariable) + "=") || text.starts_with(std::string(kRestartsVariable) + "=")) continue;
    environment_text.emplace_back(text);
  }
  for (const std::string& variable : variables) environment_text.push_back(variable);
  std::vector<char*> environment;
  for (std::string& text : environment_text) environment.push_back(text.data());
  environment.push_back(nullptr);
  std::vector<std::string> argv_text = {"surogate"};
  argv_text.insert(argv_text.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& text : argv_text) argv.push_back(text.data());
  argv.push_back(nullptr);

  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) fail_user("max_restarts: cannot start the training process: {}", std::strerror(errno));
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(128 + SIGKILL);  // the supervisor died before prctl
    ::execve("/proc/self/exe", argv.data(), environment.data());
    ::_exit(127);
  }
  return child;
}

int wait_for(pid_t child) {
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) fail_user("max_restarts: cannot wait for the training process: {}", std::strerror(errno));
  }
  return status;
}

}  // namespace

int supervise_training(const SupervisedRun& run) {
  struct sigaction action {};
  action.sa_handler = pass_to_child;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);

  std::vector<RestartRecord> restarts;
  for (int attempt = 0;; ++attempt) {
    std::vector<std::string> arguments = run.arguments;
    arguments.push_back("--log_file=" + run.log_file.string());
    if (attempt > 0) arguments.push_back("--resume_from_checkpoint=true");
    nlohmann::json records = nlohmann::json::array();
    for (const RestartRecord& restart : restarts) records.push_back({{"attempt", restart.attempt}, {"reason", restart.reason}});
    const pid_t child = start_child(arguments, {fmt::format("{}={}", kAttemptVariable, attempt),
                                                fmt::format("{}={}", kRestartsVariable, records.dump())});
    running_child = child;
    if (stop_signal != 0) ::kill(child, stop_signal);  // a signal that came while it started
    const int status = wait_for(child);
    running_child = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && attempt == 0) {
      fail_user("max_restarts: cannot run /proc/self/exe as the training process");
    }
    if (stop_signal != 0 || (WIFEXITED(status) && WEXITSTATUS(status) == kExitUserError)) return exit_code_of(status);
    const std::string reason = describe_exit(status);
    if (attempt >= run.max_restarts) {
      fmt::print(stderr, "error: the run ended ({}) and has used all of its max_restarts: {} restart{}; giving up\n",
                 reason, run.max_restarts, run.max_restarts == 1 ? "" : "s");
      return exit_code_of(status);
    }
    const std::optional<std::filesystem::path> latest = CheckpointStore(run.checkpoint_dir, 0).latest();
    restarts.push_back({attempt + 1, reason});
    MetricsLog(run.log_file)
        .write("restart", {{"attempt", attempt + 1}, {"max_restarts", run.max_restarts}, {"reason", reason},
                           {"latest_checkpoint", latest ? nlohmann::json(latest->string()) : nlohmann::json()}});
    fmt::print(stderr, "training stopped ({}); restart {} of {} from {}\n", reason, attempt + 1, run.max_restarts,
               latest ? "the latest checkpoint that verifies" : "step 0 (no checkpoint yet)");
  }
}

std::optional<std::vector<RestartRecord>> supervised_restarts() {
  const char* attempt = std::getenv(kAttemptVariable);
  if (attempt == nullptr) return std::nullopt;
  std::vector<RestartRecord> restarts;
  const char* text = std::getenv(kRestartsVariable);
  const nlohmann::json records = nlohmann::json::parse(text ? text : "[]", nullptr, false);
  if (records.is_array()) {
    for (const nlohmann::json& record : records) {
      if (record.is_object() && record.contains("attempt") && record["attempt"].is_number_integer() &&
          record.contains("reason") && record["reason"].is_string()) {
        restarts.push_back({record["attempt"].get<int>(), record["reason"].get<std::string>()});
      }
    }
  }
  return restarts;
}

}  // namespace surogate::train
