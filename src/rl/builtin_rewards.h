// The reward functions built into the engine, for the common cases (no Python needed):
//
//   exact_match[:COLUMN]   1 when the completion's answer equals the row's COLUMN (default
//                          "answer"), else 0. The answer is extracted as: the content of the last
//                          \boxed{...} (braces balanced); else the text after the last "####" (GSM8K's
//                          mark), first line; else the last number of the text (digits with an
//                          optional sign, thousands commas and decimals). Both sides are trimmed;
//                          when both parse as numbers they are compared as numbers (commas dropped,
//                          "3.0" = "3"), else as text. A row without the column is a UserError.
//   format:REGEX           1 when the whole completion matches REGEX (ECMAScript, std::regex_match;
//                          `.` does not cross newlines there: write [\s\S] for any character), else 0.
//   length_penalty:TOKENS  0 up to TOKENS completion tokens, then −(tokens − TOKENS) / TOKENS.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rl/reward_batch.h"

namespace surogate::rl {

// The answer exact_match compares (see above); nullopt when the text holds none.
std::optional<std::string> extract_answer(const std::string& completion);

// Whether an extracted answer equals the expected one (numbers as numbers, else trimmed text).
bool answers_match(const std::string& answer, const std::string& expected);

std::vector<double> exact_match_rewards(const RewardBatch& batch, const std::string& column);
std::vector<double> format_rewards(const RewardBatch& batch, const std::string& pattern);
std::vector<double> length_penalty_rewards(const RewardBatch& batch, int64_t tokens);

}  // namespace surogate::rl
