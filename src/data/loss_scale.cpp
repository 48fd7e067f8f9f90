// loss_scale strategies (see loss_scale.h).
#include "data/loss_scale.h"

namespace surogate::data {
namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Regions inside [turn.begin, turn.end) with their own weight; the rest of the turn keeps the
// turn's weight and regions of weight 0 are left out.
std::vector<WeightedSpan> split_turn(const WeightedSpan& turn, const std::vector<WeightedSpan>& regions) {
  std::vector<WeightedSpan> out;
  size_t cursor = turn.begin;
  auto emit = [&](size_t begin, size_t end, float weight) {
    if (end > begin && weight > 0.0f) out.push_back({begin, end, weight});
  };
  for (const WeightedSpan& region : regions) {
    emit(cursor, region.begin, turn.weight);
    emit(region.begin, region.end, region.weight);
    cursor = region.end;
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
    while (cursor < turn.end && is_space(text[cursor])) ++cursor;
    if (cursor + close.size() <= turn.end && text.substr(cursor, close.size()) == close) {
      cursor += close.size();
      while (cursor < turn.end && is_space(text[cursor])) ++cursor;
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

// From a line starting "Action:" to the end of the "Action Input:" line after it.
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

std::vector<WeightedSpan> loss_spans(LossScale scale, std::string_view text, const std::vector<WeightedSpan>& turns) {
  std::vector<WeightedSpan> out;
  switch (scale) {
    case LossScale::All:
      if (!text.empty()) out.push_back({0, text.size(), 1.0f});
      return out;
    case LossScale::Default:
      return turns;
    case LossScale::LastRound:
      if (!turns.empty()) out.push_back(turns.back());
      return out;
    case LossScale::IgnoreEmptyThink:
    case LossScale::Hermes:
    case LossScale::React:
      for (const WeightedSpan& turn : turns) {
        std::vector<WeightedSpan> regions = scale == LossScale::IgnoreEmptyThink ? empty_think_blocks(text, turn)
                                            : scale == LossScale::Hermes         ? hermes_calls(text, turn)
                                                                                 : react_actions(text, turn);
        for (const WeightedSpan& piece : split_turn(turn, regions)) out.push_back(piece);
      }
      return out;
  }
  return out;
}

}  // namespace surogate::data
