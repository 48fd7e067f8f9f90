// The reward worker's engine side (see reward_worker.h): spawn, JSON-lines requests, answers
// turned into values or one UserError.
#include "rl/reward_worker.h"

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "models/python_definition.h"

namespace surogate::rl {
namespace {

// The worker's answer to a call, checked: one number (or null) per completion.
std::vector<double> answer_values(const nlohmann::json& answer, const std::string& function, size_t expected) {
  const auto found = answer.find("rewards");
  SUROGATE_CHECK(found != answer.end() && found->is_array() && found->size() == expected,
                 "the reward worker answered {} for '{}'", answer.dump(), function);
  std::vector<double> values;
  for (const nlohmann::json& value : *found) {
    SUROGATE_CHECK(value.is_null() || value.is_number(), "the reward worker answered {}", value.dump());
    values.push_back(value.is_null() ? std::numeric_limits<double>::quiet_NaN() : value.get<double>());
  }
  return values;
}

}  // namespace

RewardWorker::RewardWorker(const std::vector<std::string>& functions) {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
    fail_user("reward functions: cannot create the worker's socket: {}", std::strerror(errno));
  }
  std::string python = models::python_interpreter();
  std::vector<std::string> arguments = {python, "-u", "-m", "surogate.reward_worker"};
  std::vector<std::string> environment = models::python_child_environment();
  std::vector<char*> argv, envp;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  for (std::string& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, ends[1], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, ends[1], STDOUT_FILENO);
  const int spawned = ::posix_spawnp(&pid_, python.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(ends[1]);
  socket_ = ends[0];
  if (spawned != 0) {
    ::close(socket_);
    socket_ = -1;
    pid_ = -1;
    fail_user("reward functions need Python 3, and '{}' cannot be started ({}); install Python 3 or set "
              "SUROGATE_PYTHON to the interpreter", python, std::strerror(spawned));
  }
  try {
    for (const std::string& function : functions) ask({{"load", function}}, "reward function '" + function + "'", nullptr);
  } catch (...) {
    stop();  // no destructor runs for a constructor that throws
    throw;
  }
}

RewardWorker::~RewardWorker() { stop(); }

void RewardWorker::stop() {
  if (socket_ >= 0) {
    ::shutdown(socket_, SHUT_WR);  // the worker's stdin ends: it exits
    ::close(socket_);
    socket_ = -1;
  }
  if (pid_ > 0) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
}

std::vector<double> RewardWorker::score(const std::string& function, const RewardBatch& batch) {
  nlohmann::ordered_json request = {{"call", function},
                                    {"prompts", batch.prompts},
                                    {"completions", batch.completions},
                                    {"completion_ids", batch.completion_ids},
                                    {"columns", batch.columns}};
  return answer_values(ask(request, "reward function '" + function + "'", &batch), function, batch.size());
}

nlohmann::json RewardWorker::ask(const nlohmann::ordered_json& request, const std::string& what, const RewardBatch* batch) {
  send_line(request.dump() + "\n", what);
  nlohmann::json answer = nlohmann::json::parse(read_line(what), nullptr, false);
  SUROGATE_CHECK(!answer.is_discarded() && answer.is_object(), "the reward worker's answer is not JSON");
  const auto error = answer.find("error");
  if (error == answer.end()) return answer;
  std::string message = error->get<std::string>();
  const auto row = answer.find("row");
  if (batch != nullptr && row != answer.end() && row->is_number_integer()) {
    const auto index = row->get<size_t>();
    if (index < batch->origins.size()) message += " (that row's prompt is " + batch->origins[index] + ")";
  }
  throw UserError(message);
}

void RewardWorker::send_line(const std::string& line, const std::string& what) {
  for (size_t sent = 0; sent < line.size();) {
    const ssize_t wrote = ::send(socket_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) fail_worker_gone(what);
    sent += static_cast<size_t>(wrote);
  }
}

std::string RewardWorker::read_line(const std::string& what) {
  for (;;) {
    const size_t newline = pending_.find('\n');
    if (newline != std::string::npos) {
      std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      return line;
    }
    char buffer[65536];
    const ssize_t got = ::recv(socket_, buffer, sizeof buffer, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) fail_worker_gone(what);
    pending_.append(buffer, static_cast<size_t>(got));
  }
}

void RewardWorker::fail_worker_gone(const std::string& what) {
  int status = 0;
  std::string how = "stopped";
  if (pid_ > 0 && ::waitpid(pid_, &status, 0) == pid_) {
    pid_ = -1;
    how = WIFEXITED(status) ? "exited with code " + std::to_string(WEXITSTATUS(status))
                            : "was killed by signal " + std::to_string(WTERMSIG(status));
  }
  fail_user("{}: the reward worker (python -m surogate.reward_worker) {} while running it; its messages are above "
            "(a call of sys.exit or os._exit in the reward file, or Python without the surogate package on its "
            "path)", what, how);
}

}  // namespace surogate::rl
