// Building a RewardBatch completion by completion (see reward_batch.h).
#include "rl/reward_batch.h"

#include "core/error.h"

namespace surogate::rl {

void RewardBatch::add(const nlohmann::ordered_json& prompt, const nlohmann::ordered_json& row_columns, const std::string& text,
                      std::vector<int32_t> ids, const std::string& origin) {
  const size_t index = size();
  prompts.push_back(prompt);
  // TRL: a conversational prompt's completion is a list holding the assistant's message.
  completions.push_back(prompt.is_array()
                            ? nlohmann::ordered_json::array({nlohmann::ordered_json{{"role", "assistant"}, {"content", text}}})
                            : nlohmann::ordered_json(text));
  completion_texts.push_back(text);
  completion_ids.push_back(std::move(ids));
  origins.push_back(origin);
  for (const auto& [key, value] : row_columns.items()) {
    std::vector<nlohmann::ordered_json>& column = columns[key];
    SUROGATE_CHECK(column.size() <= index, "column '{}' repeated in one row", key);
    column.resize(index, nullptr);  // a column earlier rows lacked is None for them, as in a datasets table
    column.push_back(value);
  }
  for (auto& [key, column] : columns) column.resize(index + 1, nullptr);
}

}  // namespace surogate::rl
