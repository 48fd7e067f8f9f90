// Parsing `reward_functions` entries and scoring a batch with all of them (see reward_functions.h).
#include "rl/reward_functions.h"

#include <charconv>

#include "core/error.h"
#include "rl/builtin_rewards.h"
#include "rl/reward_worker.h"

namespace surogate::rl {
namespace {

RewardFunctionSpec python_spec(const std::string& entry, const std::string& file, const std::string& function,
                               const std::filesystem::path& base_dir, const std::string& key) {
  if (function.empty()) fail_user("{}: '{}' names no function; write FILE.py:FUNCTION", key, entry);
  std::filesystem::path path(file);
  if (path.is_relative()) path = base_dir / path;
  RewardFunctionSpec spec;
  spec.kind = RewardKind::Python;
  spec.entry = entry;
  spec.name = function;
  spec.argument = path.lexically_normal().string() + ":" + function;
  return spec;
}

}  // namespace

RewardFunctionSpec parse_reward_function(const std::string& entry, const std::filesystem::path& base_dir,
                                         const std::string& key) {
  const size_t colon = entry.find(':');
  const std::string head = entry.substr(0, colon), tail = colon == std::string::npos ? "" : entry.substr(colon + 1);
  if (head.ends_with(".py")) return python_spec(entry, head, tail, base_dir, key);
  RewardFunctionSpec spec;
  spec.entry = entry;
  spec.name = head;
  if (head == "exact_match") {
    spec.kind = RewardKind::ExactMatch;
    spec.argument = tail.empty() ? "answer" : tail;
  } else if (head == "format") {
    if (tail.empty()) fail_user("{}: 'format' needs a regular expression: format:REGEX", key);
    spec.kind = RewardKind::Format;
    spec.argument = tail;
  } else if (head == "length_penalty") {
    spec.kind = RewardKind::LengthPenalty;
    const auto [end, error] = std::from_chars(tail.data(), tail.data() + tail.size(), spec.tokens);
    if (error != std::errc() || end != tail.data() + tail.size() || spec.tokens < 1) {
      fail_user("{}: '{}': length_penalty needs a positive token count: length_penalty:TOKENS", key, entry);
    }
  } else {
    fail_user("{}: '{}' is neither a Python function (FILE.py:FUNCTION) nor a built-in (exact_match[:COLUMN], "
              "format:REGEX, length_penalty:TOKENS)", key, entry);
  }
  return spec;
}

RewardFunctions::RewardFunctions(const std::vector<std::string>& entries, const std::filesystem::path& base_dir) {
  if (entries.empty()) fail_user("reward_functions: GRPO needs at least one reward function");
  std::vector<std::string> python;
  for (const std::string& entry : entries) {
    specs_.push_back(parse_reward_function(entry, base_dir));
    if (specs_.back().kind == RewardKind::Python) python.push_back(specs_.back().argument);
  }
  if (!python.empty()) worker_ = std::make_unique<RewardWorker>(python);
}

RewardFunctions::~RewardFunctions() = default;

std::vector<std::vector<double>> RewardFunctions::score(const RewardBatch& batch) {
  std::vector<std::vector<double>> rewards;
  for (const RewardFunctionSpec& spec : specs_) {
    switch (spec.kind) {
      case RewardKind::Python:
        rewards.push_back(worker_->score(spec.argument, batch));
        break;
      case RewardKind::ExactMatch:
        rewards.push_back(exact_match_rewards(batch, spec.argument));
        break;
      case RewardKind::Format:
        rewards.push_back(format_rewards(batch, spec.argument));
        break;
      case RewardKind::LengthPenalty:
        rewards.push_back(length_penalty_rewards(batch, spec.tokens));
        break;
    }
  }
  return rewards;
}

}  // namespace surogate::rl
