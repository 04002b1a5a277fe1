#include "engine/invariance_report.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/html_escape.h"

namespace ditto {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

InvarianceRow row(std::string name, int64_t mismatches, std::vector<int64_t> divergence = {}) {
  InvarianceRow r;
  r.name = std::move(name);
  r.description = "Every case <together> & \"alone\".";
  r.cases = 12;
  r.tokens = 96;
  r.mismatches = mismatches;
  r.note = "5 steps";
  r.first_divergence = std::move(divergence);
  return r;
}

InvarianceReportInfo info() {
  InvarianceReportInfo i;
  i.model = "/tmp/m<1>";
  i.cpu = "Test CPU";
  i.date = "2026-12-06 06:30:54 UTC";
  i.options = {{"--num-prompts", "7"}};
  i.estimated_seconds = 50;
  i.seconds = 42;
  return i;
}

TEST(InvarianceReportTest, EscapesEveryHtmlSpecialCharacter) {
  EXPECT_EQ(html_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&#34;c&#39;");
  EXPECT_EQ(html_escape("plain"), "plain");
}

TEST(InvarianceReportTest, PassingRunHasTheStableStructureAndNoPlot) {
  const std::string h =
      invariance_report_html({row("batch of 1 vs all 12 at once", 0), row("shuffled order", 0)}, info());
  EXPECT_NE(h.find("<table id=\"contract-rows\">"), std::string::npos);
  EXPECT_EQ(count(h, "<tr class=\"contract-row\""), 2u);
  EXPECT_NE(h.find("data-row=\"batch of 1 vs all 12 at once\" data-mismatches=\"0\" data-verdict=\"pass\""),
            std::string::npos);
  EXPECT_NE(h.find("<p id=\"verdict\" data-verdict=\"pass\""), std::string::npos);
  EXPECT_EQ(h.find("divergence-plot\" data-row"), std::string::npos);
  EXPECT_NE(h.find("/tmp/m&lt;1&gt;"), std::string::npos);  // the model, escaped
  EXPECT_EQ(h.find("/tmp/m<1>"), std::string::npos);
  EXPECT_NE(h.find("Every case &lt;together&gt; &amp; &#34;alone&#34;."), std::string::npos);
  EXPECT_NE(h.find("0:42 (estimated at start: 0:50)"), std::string::npos);
  // Self-contained: no script and no external resource.
  EXPECT_EQ(h.find("<script"), std::string::npos);
  EXPECT_EQ(h.find("src="), std::string::npos);
  EXPECT_EQ(h.find("href="), std::string::npos);
}

TEST(InvarianceReportTest, FailingRowGetsAPlotOfItsFirstDivergenceIndices) {
  const std::string h =
      invariance_report_html({row("shuffled order", 0), row("with \"traffic\"", 3, {0, 5, 5})}, info());
  EXPECT_NE(h.find("<p id=\"verdict\" data-verdict=\"fail\""), std::string::npos);
  EXPECT_NE(h.find("data-row=\"with &#34;traffic&#34;\" data-mismatches=\"3\" data-verdict=\"fail\""),
            std::string::npos);
  EXPECT_EQ(count(h, "<svg class=\"divergence-plot\""), 1u);
  EXPECT_NE(h.find("<svg class=\"divergence-plot\" data-row=\"with &#34;traffic&#34;\""), std::string::npos);
  EXPECT_EQ(count(h, "<rect "), 2u);  // index 0 (one case) and index 5 (two)
}

TEST(InvarianceReportTest, WideSpreadsOfIndicesAreBinned) {
  std::vector<int64_t> spread;
  for (int64_t i = 0; i < 1000; i += 7) spread.push_back(i);
  const std::string h = invariance_report_html({row("budget", static_cast<int64_t>(spread.size()), spread)}, info());
  EXPECT_LE(count(h, "<rect "), 41u);
  EXPECT_NE(h.find("bins of 25"), std::string::npos);
}

}  // namespace
}  // namespace ditto
