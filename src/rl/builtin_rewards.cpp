// The built-in reward functions (see builtin_rewards.h).
#include "rl/builtin_rewards.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include "core/error.h"

namespace surogate::rl {
namespace {

std::string trimmed(const std::string& text) {
  const auto begin = std::find_if_not(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); });
  const auto end = std::find_if_not(text.rbegin(), text.rend(), [](unsigned char c) { return std::isspace(c); });
  return begin < end.base() ? std::string(begin, end.base()) : std::string();
}

// The content of the last \boxed{...}, braces balanced; nullopt when there is none (or it is open).
std::optional<std::string> last_boxed(const std::string& text) {
  const std::string mark = "\\boxed{";
  const size_t at = text.rfind(mark);
  if (at == std::string::npos) return std::nullopt;
  int depth = 1;
  for (size_t i = at + mark.size(); i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) return text.substr(at + mark.size(), i - at - mark.size());
  }
  return std::nullopt;
}

const std::regex& number_pattern() {
  static const std::regex pattern(R"([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+)");
  return pattern;
}

// The number `text` is as a whole (commas dropped), if it is one.
std::optional<double> as_number(const std::string& text) {
  const std::string value = trimmed(text);
  if (value.empty() || !std::regex_match(value, number_pattern())) return std::nullopt;
  std::string digits;
  std::copy_if(value.begin(), value.end(), std::back_inserter(digits), [](char c) { return c != ','; });
  return std::stod(digits);
}

// The row's expected answer as text: strings as they are, numbers as JSON writes them.
std::string expected_text(const nlohmann::ordered_json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace

std::optional<std::string> extract_answer(const std::string& completion) {
  if (std::optional<std::string> boxed = last_boxed(completion)) return trimmed(*boxed);
  const size_t hashes = completion.rfind("####");
  if (hashes != std::string::npos) {
    const std::string after = completion.substr(hashes + 4);
    return trimmed(after.substr(0, after.find('\n')));
  }
  std::optional<std::string> last;
  for (auto it = std::sregex_iterator(completion.begin(), completion.end(), number_pattern());
       it != std::sregex_iterator(); ++it) {
    last = it->str();
  }
  return last;
}

bool answers_match(const std::string& answer, const std::string& expected) {
  const std::optional<double> a = as_number(answer), b = as_number(expected);
  if (a && b) return *a == *b;
  return trimmed(answer) == trimmed(expected);
}

std::vector<double> exact_match_rewards(const RewardBatch& batch, const std::string& column) {
  const auto found = batch.columns.find(column);
  std::vector<double> rewards(batch.size(), 0.0);
  for (size_t i = 0; i < batch.size(); ++i) {
    if (found == batch.columns.end() || found->second[i].is_null()) {
      fail_user("reward function 'exact_match:{}': the row at {} has no '{}' column to compare the answer with",
                column, batch.origins[i], column);
    }
    const std::optional<std::string> answer = extract_answer(batch.completion_texts[i]);
    rewards[i] = answer && answers_match(*answer, expected_text(found->second[i])) ? 1.0 : 0.0;
  }
  return rewards;
}

std::vector<double> format_rewards(const RewardBatch& batch, const std::string& pattern) {
  std::regex compiled;
  try {
    compiled = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& error) {
    fail_user("reward function 'format:{}': not a regular expression ({})", pattern, error.what());
  }
  std::vector<double> rewards(batch.size(), 0.0);
  for (size_t i = 0; i < batch.size(); ++i) {
    rewards[i] = std::regex_match(batch.completion_texts[i], compiled) ? 1.0 : 0.0;
  }
  return rewards;
}

std::vector<double> length_penalty_rewards(const RewardBatch& batch, int64_t tokens) {
  SUROGATE_CHECK(tokens > 0, "length_penalty needs a positive token count, got {}", tokens);
  std::vector<double> rewards(batch.size(), 0.0);
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto length = static_cast<int64_t>(batch.completion_ids[i].size());
    rewards[i] = -static_cast<double>(std::max<int64_t>(length - tokens, 0)) / static_cast<double>(tokens);
  }
  return rewards;
}

}  // namespace surogate::rl
