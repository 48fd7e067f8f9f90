// The bounds of render_limits.h: a template that loops without end, or builds an ever longer
// string or list, fails with one UserError naming the template and line instead of hanging or
// exhausting memory; a long real conversation stays well inside them. Also replays the corpus of
// fuzz_chat_template (fuzz/corpus/chat_template/), the looping templates the fuzzer found included.
#include <gtest/gtest.h>

#include "chat_template_case.h"
#include "fuzz_corpus.h"
#include "render_helper.h"
#include "user_error_of.h"

namespace surogate::chat_template {
namespace {

using testing::render_source;

TEST(RenderLimits, NestedLoopsStopAtTheStepBound) {
  // 10^12 iterations without the bound.
  std::string message = error_of([] {
    render_source("x\n{% for i in range(1000000) %}{% for j in range(1000000) %}{{ j }}{% endfor %}{% endfor %}");
  });
  EXPECT_NE(message.find("chat template test.jinja, line 2: the render takes more than 20000000 steps"), std::string::npos)
      << message;
}

TEST(RenderLimits, DoublingStringFailsAtTheSizeBound) {
  std::string message = error_of([] {
    render_source("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
  });
  EXPECT_NE(message.find("builds a string of"), std::string::npos) << message;
  EXPECT_NE(message.find("limit of 64 MiB"), std::string::npos) << message;
}

TEST(RenderLimits, HugeRepeatsAndPaddingFailBeforeAllocating) {
  EXPECT_NE(error_of([] { render_source("{{ 'ab' * 1000000000000 }}"); }).find("line 1: the template builds a string of 2000000000000 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([] { render_source("{{ [1, 2] * 10000000 }}"); }).find("a list of 20000000 items"), std::string::npos);
  EXPECT_NE(error_of([] { render_source("{{ 'x' | center(100000000000) }}"); }).find("100000000000 bytes"), std::string::npos);
  EXPECT_NE(error_of([] { render_source("{{ 'x' | indent(100000000000) }}"); }).find("100000000000 bytes"), std::string::npos);
  EXPECT_NE(error_of([] { render_source("{{ [1] | tojson(indent=100000000000) }}"); }).find("100000000000 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([] { render_source("{{ ('a\\n' * 10000) | indent(100000) }}"); }).find("bytes, more than"),
            std::string::npos);
}

TEST(RenderLimits, LongConversationRendersWithinTheBounds) {
  OrderedJson messages = OrderedJson::array();
  for (int i = 0; i < 5000; ++i) {
    messages.push_back({{"role", "user"}, {"content", "question " + std::to_string(i)}});
    messages.push_back({{"role", "assistant"}, {"content", "answer " + std::to_string(i)}});
  }
  ChatRenderInput input;
  input.messages = messages;
  for (const std::string& name : ChatTemplate::builtin_template_names()) {
    SCOPED_TRACE(name);
    std::string text = ChatTemplate::builtin(name).render(input);
    EXPECT_NE(text.find("answer 4999"), std::string::npos);
  }
}

TEST(RenderLimits, FuzzCorpusRendersOrFailsCleanly) {
  auto counts = surogate::testing::replay_fuzz_corpus("chat_template", "chat template corpus.jinja", [](const std::string& bytes) {
    fuzz::render_chat_template_case(bytes, "corpus.jinja");
  });
  EXPECT_GE(counts.files, 50u);
  EXPECT_GE(counts.bad, 1u);
}

}  // namespace
}  // namespace surogate::chat_template
