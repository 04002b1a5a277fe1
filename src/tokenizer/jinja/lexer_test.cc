// Whitespace control and lexing, checked against strings jinja2 3.1 produces.
#include "tokenizer/jinja/lexer.h"

#include <gtest/gtest.h>

#include "tokenizer/jinja/test_util.h"

namespace ditto::jinja {
namespace {

using testing::render;

TEST(JinjaLexer, DashStripsAllWhitespaceOnItsSide) {
  EXPECT_EQ(render("a  \n {{- 'x' -}} \n  b"), "axb");
  EXPECT_EQ(render("a\n  {%- if true -%}\n  x  {%- endif %}"), "ax");
  EXPECT_EQ(render("a {#- comment -#} b"), "ab");
}

TEST(JinjaLexer, TrimBlocksDropsOneNewlineAfterBlockAndComment) {
  EXPECT_EQ(render("{% if true %}\nx\n{% endif %}\ny", "{}", true), "x\ny");
  EXPECT_EQ(render("{# c #}\n\nx", "{}", true), "\nx");
  // Variables are never trimmed.
  EXPECT_EQ(render("{{ 'a' }}\nb", "{}", true), "a\nb");
  // Without trim_blocks the newline stays.
  EXPECT_EQ(render("{% if true %}\nx{% endif %}"), "\nx");
}

TEST(JinjaLexer, LstripBlocksRemovesIndentBeforeBlockTags) {
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n", "{}", true), "  x\n");
  EXPECT_EQ(render("a  {% if true %}b{% endif %}", "{}", true), "a  b");  // not at line start
  EXPECT_EQ(render("  {{ 'v' }}", "{}", true), "  v");                    // not for variables
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}", "{}", true), "  x");   // + opts out
  EXPECT_EQ(render("{% if true +%}\nx{% endif %}", "{}", true), "\nx");   // +%} keeps the newline
}

TEST(JinjaLexer, OneTrailingNewlineIsDroppedAndNewlinesNormalised) {
  EXPECT_EQ(render("x\n"), "x");
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("a\r\nb\rc"), "a\nb\nc");
}

TEST(JinjaLexer, StringLiteralEscapes) {
  EXPECT_EQ(render(R"({{ "a\nb\t\"q\" \\ \x41 \u00e9 \U0001F600 \d" }})"), "a\nb\t\"q\" \\ A \u00e9 \U0001F600 \\d");
  EXPECT_EQ(render(R"({{ 'it\'s' "+" 'adjacent' }})"), "it's+adjacent");
}

TEST(JinjaLexer, NumbersAndOperators) {
  EXPECT_EQ(render("{{ 1_000 + 0x10 + 0b11 + 0o7 }} {{ 1.5e3 }} {{ 2.5 }} {{ 7 // 2 }} {{ 2 ** 3 }}"),
            "1026 1500.0 2.5 3 8");
}

TEST(JinjaLexer, BracesInsideExpressionsDoNotEndTheTag) { EXPECT_EQ(render("{{ {'a': {'b': 1}}['a']['b'] }}"), "1"); }

TEST(JinjaLexer, RawBlocksAreData) {
  EXPECT_EQ(render("{% raw %}{{ not evaluated }}{% endraw %}"), "{{ not evaluated }}");
}

TEST(JinjaLexer, ErrorsNameTheLine) {
  try {
    render("line1\nline2 {# never closed");
    FAIL() << "expected an error";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateError::Kind::kSyntax);
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(std::string(e.what()).find("Missing end of comment tag"), std::string::npos) << e.what();
  }
  EXPECT_THROW(render("{{ 'unterminated }}"), TemplateError);
  EXPECT_THROW(render("{{ (1 }}"), TemplateError);
  EXPECT_THROW(render("{{ 1 ) }}"), TemplateError);
}

}  // namespace
}  // namespace ditto::jinja
