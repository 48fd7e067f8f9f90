// agent_template: the messages each format writes (string for string), where the loss and the
// weights land through the conversation formatter (byte codec: one token per character), the
// errors, and that the config's list of names is the one the data path knows.
#include <gtest/gtest.h>

#include "config/data_option_names.h"
#include "core/error.h"
#include "data/agent_template.h"
#include "data/formatter.h"
#include "test_helpers.h"

namespace surogate::data {
namespace {

using testing::byte_codec;
using testing::chatml_renderer;

const RowOrigin kOrigin{"agent.jsonl", 3, true};

// Key order deliberately not sorted: the tools are printed in the dataset's order.
const RowValue kTools = RowValue::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Current weather of a city", "parameters": {"type": "object",
    "properties": {"unit": {"type": "string"}, "city": {"type": "string"}}}}}])");

// user, assistant (text + two calls, one with arguments as a JSON string), two tool results,
// assistant answer; messages as data/tool_turns.h leaves them.
RowValue weather_conversation() {
  return RowValue::parse(R"([{"role": "system", "content": "Be brief."},
      {"role": "user", "content": " Paris and Oslo? "},
      {"role": "assistant", "content": "Checking.", "tool_calls": [
         {"type": "function", "function": {"name": "get_weather", "arguments": {"unit": "c", "city": "Paris"}}},
         {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
      {"role": "tool", "content": "21"},
      {"role": "tool", "content": "-3"},
      {"role": "assistant", "content": "Paris 21, Oslo -3."}])");
}

std::vector<std::string> contents(const AgentConversation& converted) {
  std::vector<std::string> out;
  for (const auto& message : converted.messages) {
    out.push_back(message["role"].get<std::string>() + ": " + message["content"].get<std::string>());
    EXPECT_FALSE(message.contains("tool_calls"));
  }
  return out;
}

TEST(AgentTemplate, NamesAreTheConfigsNames) {
  for (const std::string& name : agent_template_names()) EXPECT_TRUE(parse_agent_template(name)) << name;
  EXPECT_EQ(parse_agent_template("react"), AgentTemplate::ReactEn);
  EXPECT_FALSE(parse_agent_template("Hermes"));
  EXPECT_FALSE(parse_agent_template("qwen"));
  for (AgentTemplate format : {AgentTemplate::Hermes, AgentTemplate::Llama3, AgentTemplate::ReactEn}) {
    EXPECT_EQ(parse_agent_template(agent_template_name(format)), format);
  }
}

TEST(AgentTemplate, HermesWritesQwensFormat) {
  auto converted = apply_agent_template(AgentTemplate::Hermes, weather_conversation(), kTools, kOrigin);
  const std::string call1 =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"c\", \"city\": \"Paris\"}}\n</tool_call>";
  const std::string call2 =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>";
  EXPECT_EQ(contents(converted), (std::vector<std::string>{
      "system: Be brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
      "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
      "\"description\": \"Current weather of a city\", \"parameters\": {\"type\": \"object\", "
      "\"properties\": {\"unit\": {\"type\": \"string\"}, \"city\": {\"type\": \"string\"}}}}}\n"
      "</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call>",
      "user:  Paris and Oslo? ",
      "assistant: Checking.\n" + call1 + "\n" + call2,
      "user: <tool_response>\n21\n</tool_response>\n<tool_response>\n-3\n</tool_response>",
      "assistant: Paris 21, Oslo -3."}));
  ASSERT_EQ(converted.marks.size(), converted.messages.size());
  ASSERT_EQ(converted.marks[2].size(), 2u);
  EXPECT_EQ(converted.marks[2][0].text, call1);
  EXPECT_EQ(converted.marks[2][1].kind, AgentMark::Kind::ToolCall);
}

TEST(AgentTemplate, HermesWithoutSystemMessageOrTextBeforeTheCall) {
  RowValue messages = RowValue::parse(R"([{"role": "user", "content": "q"},
      {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather"}}]}])");
  auto converted = apply_agent_template(AgentTemplate::Hermes, messages, kTools, kOrigin);
  auto texts = contents(converted);
  ASSERT_EQ(texts.size(), 3u);
  EXPECT_TRUE(texts[0].starts_with("system: # Tools\n\n")) << texts[0];
  EXPECT_EQ(texts[2], "assistant: <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(converted.marks.size(), 3u);
}

TEST(AgentTemplate, Llama3WritesLlama31sJsonFormat) {
  auto converted = apply_agent_template(AgentTemplate::Llama3, weather_conversation(), kTools, kOrigin);
  EXPECT_EQ(contents(converted), (std::vector<std::string>{
      "system: Be brief.",
      "user: Given the following functions, please respond with a JSON for a function call with its proper "
      "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
      "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n"
      "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n"
      "        \"description\": \"Current weather of a city\",\n        \"parameters\": {\n"
      "            \"type\": \"object\",\n            \"properties\": {\n                \"unit\": {\n"
      "                    \"type\": \"string\"\n                },\n                \"city\": {\n"
      "                    \"type\": \"string\"\n                }\n            }\n        }\n    }\n}\n\n"
      "Paris and Oslo?",
      "assistant: Checking.\n{\"name\": \"get_weather\", \"parameters\": {\"unit\": \"c\", \"city\": \"Paris\"}}\n"
      "{\"name\": \"get_weather\", \"parameters\": {\"city\":\"Oslo\"}}",
      "ipython: 21",
      "ipython: -3",
      "assistant: Paris 21, Oslo -3."}));
  ASSERT_EQ(converted.marks[2].size(), 2u);
  // The newline between two calls belongs to the first.
  EXPECT_EQ(converted.marks[2][0].text,
            "{\"name\": \"get_weather\", \"parameters\": {\"unit\": \"c\", \"city\": \"Paris\"}}\n");
  EXPECT_EQ(converted.marks[2][1].text, "{\"name\": \"get_weather\", \"parameters\": {\"city\":\"Oslo\"}}");
}

TEST(AgentTemplate, ReactEnWritesOneTurnWithObservations) {
  auto converted = apply_agent_template(AgentTemplate::ReactEn, weather_conversation(), kTools, kOrigin);
  EXPECT_EQ(contents(converted), (std::vector<std::string>{
      "system: Be brief.\n\nAnswer the user with the help of these tools:\n\n"
      "get_weather: Current weather of a city\nParameters: {\"type\": \"object\", \"properties\": {\"unit\": "
      "{\"type\": \"string\"}, \"city\": {\"type\": \"string\"}}}\n\n"
      "Use this format:\n\nThought: what to do next\nAction: the tool to call, one of [get_weather]\n"
      "Action Input: the tool's arguments as a JSON object\nObservation: the tool's result\n"
      "... (Thought, Action, Action Input and Observation repeat as needed)\nThought: I know the final answer\n"
      "Final Answer: the answer to the user",
      "user:  Paris and Oslo? ",
      "assistant: Checking.\nAction: get_weather\nAction Input: {\"unit\": \"c\", \"city\": \"Paris\"}\n"
      "Action: get_weather\nAction Input: {\"city\":\"Oslo\"}\nObservation: 21\nObservation: -3\nParis 21, Oslo -3."}));
  ASSERT_EQ(converted.marks[2].size(), 3u);
  EXPECT_EQ(converted.marks[2][1].text, "Action: get_weather\nAction Input: {\"city\":\"Oslo\"}\n");
  EXPECT_EQ(converted.marks[2][2].kind, AgentMark::Kind::ToolResult);
  EXPECT_EQ(converted.marks[2][2].text, " 21\nObservation: -3\n");
}

TEST(AgentTemplate, ReactEnObservesHandWrittenActionsAndKeepsSeparateTurns) {
  // A tool result after an assistant message without tool_calls (ReAct written as text), and two
  // assistant messages in a row stay two turns.
  RowValue messages = RowValue::parse(R"([{"role": "user", "content": "q"},
      {"role": "assistant", "content": "Action: f\nAction Input: {}"}, {"role": "tool", "content": "ok"},
      {"role": "assistant", "content": "Final Answer: done"}, {"role": "assistant", "content": "Bye."}])");
  auto converted = apply_agent_template(AgentTemplate::ReactEn, messages, nullptr, kOrigin);
  EXPECT_EQ(contents(converted), (std::vector<std::string>{
      "user: q", "assistant: Action: f\nAction Input: {}\nObservation: ok\nFinal Answer: done", "assistant: Bye."}));
}

TEST(AgentTemplate, RowsWithoutToolsComeBackUnchanged) {
  RowValue messages =
      RowValue::parse(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}])");
  for (AgentTemplate format : {AgentTemplate::Hermes, AgentTemplate::Llama3, AgentTemplate::ReactEn}) {
    auto converted = apply_agent_template(format, messages, nullptr, kOrigin);
    EXPECT_EQ(converted.messages, messages);
    EXPECT_EQ(converted.marks.size(), 2u);
  }
}

TEST(AgentTemplate, ErrorsNameTheRowAndTheFormat) {
  RowValue no_user = RowValue::parse(R"([{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}])");
  try {
    apply_agent_template(AgentTemplate::Llama3, no_user, kTools, kOrigin);
    FAIL() << "expected an error";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("agent.jsonl:3"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("agent_template llama3"), std::string::npos) << error.what();
  }
  RowValue orphan = RowValue::parse(R"([{"role": "user", "content": "q"}, {"role": "tool", "content": "42"}])");
  try {
    apply_agent_template(AgentTemplate::ReactEn, orphan, nullptr, kOrigin);
    FAIL() << "expected an error";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("agent.jsonl:3"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("('42') follows no assistant message"), std::string::npos) << error.what();
  }
}

TEST(AgentTemplate, MarksArePlacedInATrimmedRendering) {
  // The template trimmed the message: the result's whitespace is gone at the turn's end.
  std::string text = "<a>Action: f\nAction Input: {}\nObservation: ok<e>";
  std::vector<AgentMark> marks = {{AgentMark::Kind::ToolCall, "Action: f\nAction Input: {}"},
                                  {AgentMark::Kind::ToolResult, " ok\n"}};
  auto placed = place_agent_marks(text, {3, text.size(), 1.0f}, marks);
  ASSERT_TRUE(placed);
  ASSERT_EQ(placed->tool_calls->size(), 1u);
  EXPECT_EQ(text.substr((*placed->tool_calls)[0].begin, 26), "Action: f\nAction Input: {}");
  ASSERT_EQ(placed->tool_results.size(), 1u);
  const WeightedSpan& result = placed->tool_results[0];
  EXPECT_EQ(text.substr(result.begin, result.end - result.begin), " ok");
  // Trailing whitespace of a mark is kept where the rendering has it.
  placed = place_agent_marks("<a>Action: f\nObservation:", {3, 25, 1.0f}, {{AgentMark::Kind::ToolCall, "Action: f\n"}});
  ASSERT_TRUE(placed);
  EXPECT_EQ((*placed->tool_calls)[0], (WeightedSpan{3, 13, 2.0f}));
  // A mark the template changed is not found.
  EXPECT_FALSE(place_agent_marks(text, {3, text.size(), 1.0f}, {{AgentMark::Kind::ToolCall, "Action: g"}}));
}

// Through the formatter: which characters carry loss, with which weight ('.' none, '1', '2').
std::string weight_map(LossScale scale, AgentTemplate format, const RowValue& messages, std::string* text = nullptr) {
  DatasetConfig dataset;
  dataset.type = DatasetType::Conversation;
  FormatOptions options;
  options.loss_scale = scale;
  options.agent_template = format;
  Formatter formatter(dataset, options, byte_codec(), chatml_renderer());
  RowValue row{{"messages", messages}, {"tools", kTools}};
  auto formatted = formatter.format(Row{row, kOrigin});
  EXPECT_TRUE(formatted.sample);
  if (text) *text = formatted.text;
  std::string map;
  const auto& sample = *formatted.sample;
  for (size_t i = 0; i < sample.input_ids.size(); ++i) {
    float weight = sample.labels[i] == kIgnoreLabel ? 0.0f : sample.weights.empty() ? 1.0f : sample.weights[i];
    map += weight == 0.0f ? '.' : weight == 1.0f ? '1' : '2';
  }
  return map;
}

// The weight of each character of `piece` (found once in `text`).
std::string weights_of(const std::string& text, const std::string& map, const std::string& piece) {
  size_t at = text.find(piece);
  EXPECT_NE(at, std::string::npos) << piece;
  return at == std::string::npos ? "" : map.substr(at, piece.size());
}

TEST(AgentTemplate, ReactEnLossUnderEachStrategy) {
  RowValue messages = RowValue::parse(R"([{"role": "user", "content": "q"},
      {"role": "assistant", "content": "Thought: t",
       "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "P"}}}]},
      {"role": "tool", "content": "21"}, {"role": "assistant", "content": "Final Answer: 21"}])");
  const std::string action = "Action: get_weather\nAction Input: {\"city\": \"P\"}";
  for (LossScale scale : {LossScale::React, LossScale::Hermes, LossScale::Default}) {
    std::string text;
    std::string map = weight_map(scale, AgentTemplate::ReactEn, messages, &text);
    const char call = scale == LossScale::Default ? '1' : '2';
    EXPECT_EQ(weights_of(text, map, "Thought: t\n"), std::string(11, '1'));
    EXPECT_EQ(weights_of(text, map, action), std::string(action.size(), call));
    // The stop word "Observation:" is the model's; the result after it is the tool's.
    EXPECT_EQ(weights_of(text, map, "\nObservation: 21\nFinal"),
              std::string(1, call) + std::string(12, '1') + "...." + std::string(5, '1'));
    EXPECT_EQ(weights_of(text, map, "Answer: 21<|end|>\n"), std::string(18, '1'));
    EXPECT_EQ(weights_of(text, map, "<|user|>q<|end|>\n"), std::string(17, '.'));
  }
  std::string text;
  std::string map = weight_map(LossScale::All, AgentTemplate::ReactEn, messages, &text);
  EXPECT_EQ(map.substr(1), std::string(map.size() - 1, '1'));  // every token but the first
}

TEST(AgentTemplate, CallsWeighUnderEachTemplateAndResponsesCarryNoLoss) {
  RowValue messages = RowValue::parse(R"([{"role": "user", "content": "q"},
      {"role": "assistant", "content": "",
       "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "P"}}}]},
      {"role": "tool", "content": "21"}, {"role": "assistant", "content": "It is 21."}])");
  struct Case {
    AgentTemplate format;
    std::string call, response;
  };
  const std::vector<Case> cases = {
      {AgentTemplate::Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\"}}\n</tool_call>",
       "<|user|><tool_response>\n21\n</tool_response><|end|>\n"},
      {AgentTemplate::Llama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"P\"}}",
       "<|ipython|>21<|end|>\n"}};
  for (const Case& c : cases) {
    for (LossScale scale : {LossScale::Hermes, LossScale::React}) {
      std::string text;
      std::string map = weight_map(scale, c.format, messages, &text);
      EXPECT_EQ(weights_of(text, map, c.call + "<|end|>\n"), std::string(c.call.size(), '2') + std::string(8, '1'));
      EXPECT_EQ(weights_of(text, map, c.response), std::string(c.response.size(), '.'));
      EXPECT_EQ(weights_of(text, map, "It is 21.<|end|>\n"), std::string(17, '1'));
    }
  }
}

}  // namespace
}  // namespace surogate::data
