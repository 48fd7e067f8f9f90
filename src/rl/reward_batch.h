// What reward functions see of one batch of completions, in TRL's terms: the prompts as the rows
// gave them (a string, or chat messages), the completions (text; for chat prompts TRL's
// [{"role": "assistant", "content": text}]), their token ids, and every other column of the
// prompt's row, one value per completion.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace surogate::rl {

struct RewardBatch {
  std::vector<nlohmann::ordered_json> prompts;
  std::vector<nlohmann::ordered_json> completions;
  std::vector<std::string> completion_texts;  // the text of each completion (what built-ins read)
  std::vector<std::vector<int32_t>> completion_ids;
  std::map<std::string, std::vector<nlohmann::ordered_json>> columns;
  std::vector<std::string> origins;  // where each completion's prompt came from ("data.jsonl:3"), for errors

  size_t size() const { return completion_texts.size(); }
  // Appends one completion of `prompt` (a row's prompt value and its other columns).
  void add(const nlohmann::ordered_json& prompt, const nlohmann::ordered_json& row_columns, const std::string& text,
           std::vector<int32_t> ids, const std::string& origin);
};

}  // namespace surogate::rl
