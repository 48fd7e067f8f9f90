// Whitespace control with Hugging Face's settings: trim_blocks, lstrip_blocks, `-` and `+`
// modifiers, and keep_trailing_newline=False. Expected strings are jinja2's.
#include <gtest/gtest.h>

#include "render_helper.h"

namespace surogate::chat_template {
namespace {

using testing::render_source;

TEST(Whitespace, TrimBlocksDropsTheNewlineAfterABlockTag) {
  EXPECT_EQ(render_source("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
  EXPECT_EQ(render_source("{{ 'x' }}\nkept"), "x\nkept");  // not after expressions
  EXPECT_EQ(render_source("{# comment #}\nnext"), "next");
}

TEST(Whitespace, LstripBlocksDropsIndentBeforeABlockTag) {
  EXPECT_EQ(render_source("a\n    {% if true %}\n    b\n    {% endif %}\nc"), "a\n    b\nc");
  EXPECT_EQ(render_source("x  {% if true %}y{% endif %}"), "x  y");  // not at the start of a line
  EXPECT_EQ(render_source("    {{ 'e' }}"), "    e");                // not before expressions
  EXPECT_EQ(render_source("a\n  {%+ if true %}b{% endif %}"), "a\n  b");
}

TEST(Whitespace, MinusStripsAllWhitespace) {
  EXPECT_EQ(render_source("a  \n  {{- 'b' -}}  \n  c"), "abc");
  EXPECT_EQ(render_source("a\n\n{%- if true -%}\n\n b {%- endif %}"), "ab");
}

TEST(Whitespace, PlusKeepsTheNewlineAfterABlockTag) {
  EXPECT_EQ(render_source("{% if true +%}\nyes{% endif %}"), "\nyes");
}

TEST(Whitespace, OneTrailingNewlineIsDroppedAndCrlfNormalized) {
  EXPECT_EQ(render_source("text\n"), "text");
  EXPECT_EQ(render_source("text\n\n"), "text\n");
  EXPECT_EQ(render_source("a\r\nb"), "a\nb");
}

}  // namespace
}  // namespace surogate::chat_template
