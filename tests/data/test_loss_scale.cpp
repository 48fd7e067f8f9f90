// loss_scale strategies: which characters carry loss and their weights, on hand-written text
// (loss_spans) and through the conversation formatter with a byte-level codec (one token per
// byte, so weights can be checked per character), plus response_prefix.
#include <gtest/gtest.h>

#include "data/formatter.h"
#include "data/loss_scale.h"
#include "test_helpers.h"

namespace surogate::data {
namespace {

using testing::byte_codec;
using testing::chatml_renderer;

std::string_view span_text(std::string_view text, const WeightedSpan& span) {
  return text.substr(span.begin, span.end - span.begin);
}

std::vector<AssistantTurn> plain_turns(const std::vector<WeightedSpan>& spans) {
  std::vector<AssistantTurn> turns;
  for (const WeightedSpan& span : spans) turns.push_back({span, std::nullopt, {}});
  return turns;
}

TEST(LossScale, NamesParseAndOnlyAgentStrategiesWeigh) {
  for (const char* name : {"default", "last_round", "all", "ignore_empty_think", "hermes", "react"}) {
    EXPECT_TRUE(parse_loss_scale(name).has_value()) << name;
  }
  EXPECT_FALSE(parse_loss_scale("Default").has_value());
  EXPECT_FALSE(loss_scale_has_weights(LossScale::IgnoreEmptyThink));
  EXPECT_TRUE(loss_scale_has_weights(LossScale::Hermes));
  EXPECT_TRUE(loss_scale_has_weights(LossScale::React));
}

TEST(LossScale, DefaultLastRoundAndAll) {
  std::string text = "u1 A1 u2 A2";
  std::vector<WeightedSpan> turns = {{3, 5, 1.0f}, {9, 11, 1.0f}};
  EXPECT_EQ(loss_spans(LossScale::Default, text, plain_turns(turns)), turns);
  EXPECT_EQ(loss_spans(LossScale::LastRound, text, plain_turns(turns)), (std::vector<WeightedSpan>{{9, 11, 1.0f}}));
  EXPECT_EQ(loss_spans(LossScale::All, text, plain_turns(turns)), (std::vector<WeightedSpan>{{0, 11, 1.0f}}));
}

TEST(LossScale, IgnoreEmptyThinkDropsOnlyEmptyBlocks) {
  std::string text = "<think>\n\n</think>\n\nHi<think>real</think>x";
  auto spans = loss_spans(LossScale::IgnoreEmptyThink, text, plain_turns({{0, text.size(), 1.0f}}));
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(span_text(text, spans[0]), "Hi<think>real</think>x");
}

TEST(LossScale, HermesWeighsToolCallBlocksTwice) {
  std::string text = "Let me check.\n<tool_call>\n{\"name\": \"f\"}\n</tool_call><end>";
  auto spans = loss_spans(LossScale::Hermes, text, plain_turns({{0, text.size(), 1.0f}}));
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(span_text(text, spans[0]), "Let me check.\n");
  EXPECT_EQ(spans[0].weight, 1.0f);
  EXPECT_EQ(span_text(text, spans[1]), "<tool_call>\n{\"name\": \"f\"}\n</tool_call>");
  EXPECT_EQ(spans[1].weight, 2.0f);
  EXPECT_EQ(span_text(text, spans[2]), "<end>");
}

TEST(LossScale, ReactWeighsActionAndActionInputLines) {
  std::string text = "Thought: look it up\nAction: search\nAction Input: {\"q\": 1}\nObservation: x";
  auto spans = loss_spans(LossScale::React, text, plain_turns({{0, text.size(), 1.0f}}));
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(span_text(text, spans[1]), "Action: search\nAction Input: {\"q\": 1}\n");  // its newline too
  EXPECT_EQ(spans[1].weight, 2.0f);
}

TEST(LossScale, KnownToolCallsAndResultsReplaceTheSyntaxSearch) {
  // "Action: x" is free text here: an agent template said where the calls and results are.
  std::string text = "Action: x\nCALL rest RESULT end";
  AssistantTurn turn{{0, text.size(), 1.0f}, std::vector<WeightedSpan>{{10, 14, 1.0f}}, {{20, 26, 0.0f}}};
  for (LossScale scale : {LossScale::Hermes, LossScale::React}) {
    auto spans = loss_spans(scale, text, {turn});
    ASSERT_EQ(spans.size(), 4u);
    EXPECT_EQ(spans[0], (WeightedSpan{0, 10, 1.0f}));
    EXPECT_EQ(spans[1], (WeightedSpan{10, 14, 2.0f}));
    EXPECT_EQ(spans[2], (WeightedSpan{14, 20, 1.0f}));
    EXPECT_EQ(spans[3], (WeightedSpan{26, text.size(), 1.0f}));
  }
  // The other strategies do not weigh calls, but tool results carry no loss except under `all`.
  for (LossScale scale : {LossScale::Default, LossScale::LastRound, LossScale::IgnoreEmptyThink}) {
    EXPECT_EQ(loss_spans(scale, text, {turn}), (std::vector<WeightedSpan>{{0, 20, 1.0f}, {26, text.size(), 1.0f}}));
  }
  EXPECT_EQ(loss_spans(LossScale::All, text, {turn}), (std::vector<WeightedSpan>{{0, text.size(), 1.0f}}));
  // Known and empty: nothing to weigh, even where the text looks like a call.
  turn.tool_calls->clear();
  turn.tool_results.clear();
  EXPECT_EQ(loss_spans(LossScale::React, text, {turn}), (std::vector<WeightedSpan>{{0, text.size(), 1.0f}}));
}

Row conversation_row(RowValue messages) {
  return Row{RowValue{{"messages", std::move(messages)}}, RowOrigin{"chat.jsonl", 1, true}};
}

TEST(LossScale, FormatterCarriesWeightsOnlyForWeightedStrategies) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Conversation;
  RowValue messages = RowValue::parse(R"([{"role": "user", "content": "q"},
      {"role": "assistant", "content": "a<tool_call>c</tool_call>"}])");
  FormatOptions options;
  Formatter plain(dataset, options, byte_codec(), chatml_renderer());
  auto row = plain.format(conversation_row(messages));
  ASSERT_TRUE(row.sample);
  EXPECT_TRUE(row.sample->weights.empty());

  options.loss_scale = LossScale::Hermes;
  Formatter hermes(dataset, options, byte_codec(), chatml_renderer());
  row = hermes.format(conversation_row(messages));
  ASSERT_TRUE(row.sample);
  const auto& sample = *row.sample;
  ASSERT_EQ(sample.weights.size(), sample.input_ids.size());
  size_t call = row.text.find("<tool_call>"), call_end = row.text.find("</tool_call>") + 12;
  size_t answer = row.text.find("|>a") + 2;
  for (size_t i = 0; i < sample.input_ids.size(); ++i) {
    float expected = i >= call && i < call_end ? 2.0f : i >= answer && i < row.text.find("<|end|>", answer) + 8 ? 1.0f : 0.0f;
    EXPECT_EQ(sample.weights[i], expected) << "char " << i;
    EXPECT_EQ(sample.labels[i] != kIgnoreLabel, expected > 0.0f) << "char " << i;
  }
}

TEST(LossScale, ResponsePrefixIsPutBeforeEveryAssistantResponse) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Conversation;
  FormatOptions options;
  options.response_prefix = "<think>\n\n</think>\n\n";
  options.loss_scale = LossScale::IgnoreEmptyThink;
  Formatter formatter(dataset, options, byte_codec(), chatml_renderer());
  auto row = formatter.format(conversation_row(RowValue::parse(R"([{"role": "user", "content": "q"},
      {"role": "assistant", "content": "a"}, {"role": "user", "content": "r"},
      {"role": "assistant", "content": "<think>\n\n</think>\n\nb"}])")));
  EXPECT_EQ(row.text, "<|user|>q<|end|>\n<|assistant|><think>\n\n</think>\n\na<|end|>\n<|user|>r<|end|>\n"
                      "<|assistant|><think>\n\n</think>\n\nb<|end|>\n");
  ASSERT_TRUE(row.sample);
  std::string trained;
  for (size_t i = 0; i < row.sample->labels.size(); ++i) {
    if (row.sample->labels[i] != kIgnoreLabel) trained += static_cast<char>(row.sample->labels[i]);
  }
  EXPECT_EQ(trained, "a<|end|>\nb<|end|>\n");  // the empty think blocks carry no loss
}

TEST(LossScale, LastRoundTrainsOnlyTheFinalAssistantTurn) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Conversation;
  FormatOptions options;
  options.loss_scale = LossScale::LastRound;
  Formatter formatter(dataset, options, byte_codec(), chatml_renderer());
  auto row = formatter.format(conversation_row(RowValue::parse(R"([{"role": "user", "content": "q"},
      {"role": "assistant", "content": "a"}, {"role": "user", "content": "r"}, {"role": "assistant", "content": "b"}])")));
  ASSERT_TRUE(row.sample);
  std::string trained;
  for (int32_t label : row.sample->labels) {
    if (label != kIgnoreLabel) trained += static_cast<char>(label);
  }
  EXPECT_EQ(trained, "b<|end|>\n");
}

}  // namespace
}  // namespace surogate::data
