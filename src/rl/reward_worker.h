// The user's Python reward functions, run by a long-lived worker process
// (python/surogate/reward_worker.py, started as `python -m surogate.reward_worker` with the
// interpreter and package path the DSL uses: models/python_definition.h) so that the engine does
// not link libpython. The two speak JSON lines over a socket pair that is the worker's stdin and
// stdout; the user's prints go to stderr. Every mistake of the user's code (a missing file or
// function, an import error, a function that raises, returns the wrong number of values or a
// non-number) is one UserError naming the function and, for a row, where its prompt came from.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rl/reward_batch.h"

namespace surogate::rl {

class RewardWorker {
public:
  // Starts the worker and loads each "FILE.py:FUNCTION" (paths as given: absolute, or relative to
  // this process's folder). UserError when Python cannot start or a function cannot be loaded.
  explicit RewardWorker(const std::vector<std::string>& functions);
  ~RewardWorker();  // closes the worker's stdin and waits for it
  RewardWorker(const RewardWorker&) = delete;
  RewardWorker& operator=(const RewardWorker&) = delete;

  // One value per completion (NaN where the function returned None).
  std::vector<double> score(const std::string& function, const RewardBatch& batch);

private:
  // Sends one request line and returns the answer; UserError naming `what` when the worker is gone.
  nlohmann::json ask(const nlohmann::ordered_json& request, const std::string& what, const RewardBatch* batch);
  void send_line(const std::string& line, const std::string& what);
  std::string read_line(const std::string& what);
  [[noreturn]] void fail_worker_gone(const std::string& what);
  void stop();  // closes the worker's stdin and waits for it to exit

  pid_t pid_ = -1;
  int socket_ = -1;
  std::string pending_;  // bytes read past the last answer's newline
};

}  // namespace surogate::rl
