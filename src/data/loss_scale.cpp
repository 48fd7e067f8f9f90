// loss_scale strategies (see loss_scale.h).
#include "data/loss_scale.h"

#include <algorithm>

namespace surogate::data {
namespace {

bool is_loss_scale_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Regions inside [turn.begin, turn.end) with their own weight; the rest of the turn keeps the
// turn's weight and regions of weight 0 are left out. Regions are sorted here; one that starts
// inside an earlier one keeps only its part after it.
std::vector<WeightedSpan> split_turn(const WeightedSpan& turn, std::vector<WeightedSpan> regions) {
  std::sort(regions.begin(), regions.end(),
            [](const WeightedSpan& a, const WeightedSpan& b) { return a.begin < b.begin; });
  std::vector<WeightedSpan> out;
  size_t cursor = turn.begin;
  auto emit = [&](size_t begin, size_t end, float weight) {
    if (end > begin && weight > 0.0f) out.push_back({begin, end, weight});
  };
  for (const WeightedSpan& region : regions) {
    size_t begin = std::max(region.begin, cursor), end = std::min(region.end, turn.end);
    if (end <= begin) continue;
    emit(cursor, begin, turn.weight);
    emit(begin, end, region.weight);
    cursor = end;
  }
  emit(cursor, turn.end, turn.weight);
  return out;
}

// Empty think blocks: "<think>" whitespace "</think>" whitespace.
std::vector<WeightedSpan> empty_think_blocks(std::string_view text, const WeightedSpan& turn) {
  std::vector<WeightedSpan> regions;
  const std::string_view open = "<think>", close = "</think>";
  size_t at = turn.begin;
  while ((at = text.find(open, at)) != std::string_view::npos && at < turn.end) {
    size_t cursor = at + open.size();
    while (cursor < turn.end && is_loss_scale_space(text[cursor])) ++cursor;
    if (cursor + close.size() <= turn.end && text.substr(cursor, close.size()) == close) {
      cursor += close.size();
      while (cursor < turn.end && is_loss_scale_space(text[cursor])) ++cursor;
      regions.push_back({at, cursor, 0.0f});
    }
    at = cursor > at ? cursor : at + 1;
  }
  return regions;
}

// <tool_call> … </tool_call> blocks (an unclosed one runs to the end of the turn).
std::vector<WeightedSpan> hermes_calls(std::string_view text, const WeightedSpan& turn) {
  std::vector<WeightedSpan> regions;
  const std::string_view open = "<tool_call>", close = "</tool_call>";
  size_t at = turn.begin;
  while ((at = text.find(open, at)) != std::string_view::npos && at < turn.end) {
    size_t end = text.find(close, at + open.size());
    end = end == std::string_view::npos || end + close.size() > turn.end ? turn.end : end + close.size();
    regions.push_back({at, end, 2.0f});
    at = end;
  }
  return regions;
}

// From a line starting "Action:" to the end of the "Action Input:" line after it, its newline
// included (byte-level BPE joins a newline to the punctuation before it: "}\n" is one token).
std::vector<WeightedSpan> react_actions(std::string_view text, const WeightedSpan& turn) {
  std::vector<WeightedSpan> regions;
  auto line_end = [&](size_t from) {
    size_t end = text.find('\n', from);
    return end == std::string_view::npos || end > turn.end ? turn.end : end;
  };
  size_t at = turn.begin;
  while (at < turn.end) {
    size_t end = line_end(at);
    std::string_view line = text.substr(at, end - at);
    if (line.starts_with("Action:")) {
      size_t stop = end;
      if (end < turn.end && text.substr(end + 1).starts_with("Action Input:")) stop = line_end(end + 1);
      if (stop < turn.end) ++stop;  // the newline
      regions.push_back({at, stop, 2.0f});
      end = stop;
    }
    at = end + 1;
  }
  return regions;
}

}  // namespace

std::optional<LossScale> parse_loss_scale(std::string_view name) {
  if (name == "default") return LossScale::Default;
  if (name == "last_round") return LossScale::LastRound;
  if (name == "all") return LossScale::All;
  if (name == "ignore_empty_think") return LossScale::IgnoreEmptyThink;
  if (name == "hermes") return LossScale::Hermes;
  if (name == "react") return LossScale::React;
  return std::nullopt;
}

bool loss_scale_has_weights(LossScale scale) { return scale == LossScale::Hermes || scale == LossScale::React; }

bool loss_scale_is_agent(LossScale scale) { return loss_scale_has_weights(scale); }

namespace {

// The regions of one turn whose weight differs from the turn's under `scale`.
std::vector<WeightedSpan> turn_regions(LossScale scale, std::string_view text, const AssistantTurn& turn) {
  std::vector<WeightedSpan> regions;
  for (const WeightedSpan& result : turn.tool_results) regions.push_back({result.begin, result.end, 0.0f});
  if (loss_scale_is_agent(scale)) {
    if (turn.tool_calls) {
      for (const WeightedSpan& call : *turn.tool_calls) regions.push_back({call.begin, call.end, 2.0f});
    } else {
      auto calls = scale == LossScale::Hermes ? hermes_calls(text, turn.span) : react_actions(text, turn.span);
      regions.insert(regions.end(), calls.begin(), calls.end());
    }
  }
  if (scale == LossScale::IgnoreEmptyThink) {
    auto blocks = empty_think_blocks(text, turn.span);
    regions.insert(regions.end(), blocks.begin(), blocks.end());
  }
  return regions;
}

}  // namespace

std::vector<WeightedSpan> loss_spans(LossScale scale, std::string_view text, const std::vector<AssistantTurn>& turns) {
  std::vector<WeightedSpan> out;
  if (scale == LossScale::All) {
    if (!text.empty()) out.push_back({0, text.size(), 1.0f});
    return out;
  }
  const size_t first = scale == LossScale::LastRound && !turns.empty() ? turns.size() - 1 : 0;
  for (size_t i = first; i < turns.size(); ++i) {
    for (const WeightedSpan& piece : split_turn(turns[i].span, turn_regions(scale, text, turns[i]))) {
      out.push_back(piece);
    }
  }
  return out;
}

}  // namespace surogate::data
