// The config's `loss_scale`: which characters of a rendered conversation carry loss, and with
// what weight. Weight 0 means "no loss" (label -100); any other weight w multiplies that token's
// cross-entropy, and the loss is the weighted mean Σ w·ce / Σ w over the loss tokens.
//   default             every assistant turn, weight 1
//   last_round          only the final assistant turn
//   all                 every token (prompts, system text and tool responses included)
//   ignore_empty_think  as default, but an empty <think>…</think> block (whitespace inside) and
//                       the whitespace after it carry no loss
//   hermes              as default, but each <tool_call>…</tool_call> block weighs 2 (the
//                       function name and arguments against the free text, which weighs 1)
//   react               as default, but the "Action: …" and "Action Input: …" lines weigh 2
// With an agent template (data/agent_template.h) the tool calls are the text it wrote, whatever
// its syntax, and both agent strategies weigh those; tool results it wrote inside an assistant
// turn (react_en's observations) carry no loss under every strategy but `all`.
// Only hermes and react produce weights other than 0 and 1; the others only set labels, so
// their batches carry no weight array at all.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace surogate::data {

enum class LossScale { Default, LastRound, All, IgnoreEmptyThink, Hermes, React };

// nullopt for an unknown name (the config check names the known ones).
std::optional<LossScale> parse_loss_scale(std::string_view name);
// True for the strategies that weigh tokens with values other than 0 and 1.
bool loss_scale_has_weights(LossScale scale);
// True for the strategies that weigh tool calls (hermes, react): they need tool-calling data.
bool loss_scale_is_agent(LossScale scale);

// [begin, end) characters of the rendered text with one loss weight.
struct WeightedSpan {
  size_t begin = 0;
  size_t end = 0;
  float weight = 1.0f;
  bool operator==(const WeightedSpan&) const = default;
};

// An assistant turn of the rendered text and what an agent template wrote inside it.
struct AssistantTurn {
  WeightedSpan span;
  // Set when an agent template wrote the turn: its tool calls (the agent strategies weigh these
  // instead of searching the text for their syntax).
  std::optional<std::vector<WeightedSpan>> tool_calls;
  // Tool results inside the turn (react_en's observations): no loss.
  std::vector<WeightedSpan> tool_results;
};

// The loss spans of `text`, ordered and disjoint, weight > 0; text outside them carries no loss.
// `turns` are the assistant turns in order.
std::vector<WeightedSpan> loss_spans(LossScale scale, std::string_view text, const std::vector<AssistantTurn>& turns);

}  // namespace surogate::data
