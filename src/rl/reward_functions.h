// GRPO's `reward_functions` list: each entry either a Python function "FILE.py:FUNCTION" (run by
// the reward worker, rl/reward_worker.h) or a built-in (rl/builtin_rewards.h: "exact_match[:COLUMN]",
// "format:REGEX", "length_penalty:TOKENS"). An entry whose part before the first ':' ends in ".py"
// is Python; relative files are resolved from `base_dir` (the config file's folder). The worker
// is started only when some entry is Python, once, and loads every Python function up front, so
// a missing file or function stops the run before the first rollout.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "rl/reward_batch.h"

namespace surogate::rl {

class RewardWorker;

enum class RewardKind { Python, ExactMatch, Format, LengthPenalty };

struct RewardFunctionSpec {
  RewardKind kind = RewardKind::Python;
  std::string entry;     // as configured
  std::string name;      // what the metrics call it (rewards/<name>): the Python function's name, or the built-in's
  std::string argument;  // Python: "ABSOLUTE_FILE.py:FUNCTION"; exact_match: the column; format: the regex
  int64_t tokens = 0;    // length_penalty
};

// UserError naming `key` and the entry when it is neither (an unknown built-in, a bad argument).
RewardFunctionSpec parse_reward_function(const std::string& entry, const std::filesystem::path& base_dir,
                                         const std::string& key = "reward_functions");

class RewardFunctions {
public:
  // UserError when `entries` is empty or an entry is bad (parse_reward_function), or a Python
  // function cannot be loaded (RewardWorker).
  RewardFunctions(const std::vector<std::string>& entries, const std::filesystem::path& base_dir);
  ~RewardFunctions();
  RewardFunctions(const RewardFunctions&) = delete;
  RewardFunctions& operator=(const RewardFunctions&) = delete;

  // rewards[f][i]: function f's reward of completion i (NaN: None from Python).
  std::vector<std::vector<double>> score(const RewardBatch& batch);
  const std::vector<RewardFunctionSpec>& specs() const { return specs_; }

private:
  std::vector<RewardFunctionSpec> specs_;
  std::unique_ptr<RewardWorker> worker_;  // present when some function is Python
};

}  // namespace surogate::rl
