// Python DSL definitions compiled to JSON IR (python_definition.h).
#include "models/python_definition.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

extern char** environ;

namespace surogate::models {
namespace {
namespace fs = std::filesystem;

// The folder the compiled IR files go to, removed with the process's static objects.
class ScratchFolder {
public:
  const fs::path& path() {
    if (path_.empty()) {
      std::string pattern = (fs::temp_directory_path() / "surogate-dsl-XXXXXX").string();
      if (::mkdtemp(pattern.data()) == nullptr) fail_user("cannot create a temporary folder: {}", std::strerror(errno));
      path_ = pattern;
    }
    return path_;
  }
  ~ScratchFolder() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }

private:
  fs::path path_;
};

// python/ of the source tree when this executable is its build/surogate (or a test binary below
// build/); empty when not found (the package must then be installed).
fs::path source_tree_package() {
  std::error_code error;
  fs::path at = fs::read_symlink("/proc/self/exe", error).parent_path();
  for (int up = 0; up < 4 && !at.empty(); ++up, at = at.parent_path()) {
    if (fs::exists(at / "python" / "surogate" / "dsl" / "__main__.py")) return at / "python";
    if (at == at.parent_path()) break;
  }
  return {};
}

// $SUROGATE_PYTHON; else the python3 beside this executable (a virtual environment's bin/, where
// `pip install .` put both); else python3 on the PATH.
std::string chosen_interpreter() {
  const char* chosen = std::getenv("SUROGATE_PYTHON");
  if (chosen != nullptr && *chosen != '\0') return chosen;
  std::error_code error;
  const fs::path beside = fs::read_symlink("/proc/self/exe", error).parent_path() / "python3";
  if (!error && ::access(beside.c_str(), X_OK) == 0) return beside.string();
  return "python3";
}

struct Spawned {
  int status = 0;
  std::string stderr_text;
};

// Runs `arguments` with `environment`, capturing stderr; stdout is discarded.
Spawned run_capturing_stderr(const std::string& program, std::vector<std::string> arguments,
                             std::vector<std::string> environment, const std::string& source) {
  int pipe_ends[2];
  if (::pipe2(pipe_ends, O_CLOEXEC) != 0) fail_user("{}: pipe: {}", source, std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv, envp;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  for (std::string& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_ends[1]);
  if (spawned != 0) {
    ::close(pipe_ends[0]);
    fail_user("{}: a Python model definition needs Python 3 to compile it, and '{}' cannot be started ({}); install "
              "Python 3 or set SUROGATE_PYTHON to the interpreter", source, program, std::strerror(spawned));
  }
  Spawned result;
  char buffer[4096];
  for (ssize_t got; (got = ::read(pipe_ends[0], buffer, sizeof buffer)) != 0;) {
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) break;
    result.stderr_text.append(buffer, static_cast<size_t>(got));
  }
  ::close(pipe_ends[0]);
  while (::waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

std::vector<std::string> child_environment(const fs::path& package) {
  std::vector<std::string> environment;
  std::string python_path = package.string();
  for (char** variable = environ; *variable != nullptr; ++variable) {
    const std::string entry(*variable);
    if (entry.rfind("PYTHONPATH=", 0) == 0) {
      const std::string existing = entry.substr(11);
      if (!existing.empty()) python_path = python_path.empty() ? existing : python_path + ":" + existing;
      continue;
    }
    if (entry.rfind("SUROGATE_BIN=", 0) == 0) continue;
    environment.push_back(entry);
  }
  if (!python_path.empty()) environment.push_back("PYTHONPATH=" + python_path);
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  // The DSL asks this executable for its ops, unless this is not the surogate command (a test binary).
  if (!error && self.filename() == "surogate") environment.push_back("SUROGATE_BIN=" + self.string());
  return environment;
}

}  // namespace

std::string python_interpreter() { return chosen_interpreter(); }

std::vector<std::string> python_child_environment() { return child_environment(source_tree_package()); }

bool is_python_definition(const fs::path& file) {
  const std::string text = file.string();
  const size_t colon = text.rfind(':');
  const std::string path = colon != std::string::npos && text.find(".py:") != std::string::npos ? text.substr(0, colon) : text;
  return fs::path(path).extension() == ".py";
}

fs::path compile_python_definition(const fs::path& file, const fs::path& model_dir, int64_t batch, int64_t sequence,
                                   int64_t lmhead_chunks, const std::string& source) {
  static std::mutex mutex;
  static ScratchFolder scratch;
  static std::map<std::tuple<std::string, std::string, int64_t, int64_t, int64_t>, fs::path> compiled;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(file.string(), fs::absolute(model_dir).string(), batch, sequence, lmhead_chunks);
  if (auto found = compiled.find(key); found != compiled.end()) return found->second;

  const std::string text = file.string();
  const std::string script = text.find(".py:") != std::string::npos ? text.substr(0, text.rfind(':')) : text;
  if (!fs::is_regular_file(script)) fail_user("{}: '{}' is not a file", source, script);
  const fs::path output = scratch.path() / fmt::format("definition-{}.json", compiled.size());
  const std::string python = chosen_interpreter();
  const fs::path package = source_tree_package();
  const Spawned run = run_capturing_stderr(
      python,
      {python, "-m", "surogate.dsl", text, "--model", model_dir.string(), "--batch", std::to_string(batch), "--seq",
       std::to_string(sequence), "--lmhead-chunks", std::to_string(lmhead_chunks), "-o", output.string()},
      child_environment(package), source);
  std::string message = run.stderr_text;
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  if (message.rfind("error: ", 0) == 0) message = message.substr(7);
  if (!WIFEXITED(run.status) || WEXITSTATUS(run.status) != 0 || !fs::exists(output)) {
    if (message.find("No module named surogate") != std::string::npos ||
        message.find("No module named 'surogate'") != std::string::npos) {
      fail_user("{}: compiling '{}' needs the surogate Python package: `pip install .` in the source tree (or run "
                "the build/surogate of a source tree, which finds python/ beside it)", source, text);
    }
    fail_user("{}: {}", source, message.empty() ? fmt::format("{} -m surogate.dsl failed", python) : message);
  }
  compiled.emplace(key, output);
  return output;
}

}  // namespace surogate::models
